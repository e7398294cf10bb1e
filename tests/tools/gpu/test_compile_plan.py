"""jaxgpt_tools.gpu.compile_plan: the training step compiled for compile-only GPU devices (no GPU needed).

The compile tests need the jax CUDA plugin (`make gpu-plan` installs it into .venv-gpu-aot) and
are skipped without it; run them there:
    .venv-gpu-aot/bin/python -m pytest tests/tools/gpu/test_compile_plan.py
Plans are "compiled without a GPU, no autotuning": these tests check structure, not speed.
"""

import pytest

from jaxgpt_tools.gpu import compile_plan as gpu_plan

needs_plugin = pytest.mark.skipif(not gpu_plan.plugin_available(), reason="jax CUDA plugin not installed (make gpu-plan)")


def test_every_device_description_names_its_device():
    assert gpu_plan.device_names() == ["a100", "h100", "h200"]
    for name in gpu_plan.device_names():
        text = gpu_plan.target_config(name)
        assert 'platform_name: "CUDA"' in text and "device_description_str" in text


def test_unknown_device_is_refused_by_name():
    with pytest.raises(ValueError, match="unknown device 'v100'.*h100"):
        gpu_plan.target_config("v100")


def test_roofline_is_the_larger_of_compute_and_memory_time():
    plan = gpu_plan.Plan(device="h100", num_devices=1, temp_bytes=0, argument_bytes=0, output_bytes=0, alias_bytes=0,
                         fusions={}, triton_gemms=0, cublas_gemms=0, fp8_gemms=[], collectives={}, while_loops=0,
                         collective_bytes={}, custom_calls={}, flops=989e9, bytes_accessed=6.7e9, compile_s=0.0)
    assert plan.roofline_ms == {"bound": 2.0, "compute": 1.0, "memory": 2.0}
    assert plan.summary()["roofline_ms"] == 2.0


@pytest.fixture(scope="module")
def tiny_plan():
    from jaxgpt import presets

    return gpu_plan.plan_train_step(presets.tiny_preset(), "h100", 1)


@needs_plugin
def test_tiny_step_compiles_for_an_h100(tiny_plan):
    summary = tiny_plan.summary()
    assert summary["device"] == "h100" and summary["caveat"] == gpu_plan.CAVEAT
    assert tiny_plan.temp_bytes > 0 and tiny_plan.argument_bytes > 0
    assert tiny_plan.triton_gemms + tiny_plan.cublas_gemms > 0


@needs_plugin
def test_fp8_head_is_three_fp8_gemms_with_the_records_operand_types(tiny_plan):
    # RECORD.md: forward x_f8 (e4m3) @ w_f8 (e4m3); backward grad_f8 (e5m2) against w (e4m3)
    # for grad_x and against x (e4m3) for grad_w.
    assert sorted(tiny_plan.fp8_gemms) == ["f8e4m3fn x f8e4m3fn", "f8e4m3fn x f8e5m2", "f8e4m3fn x f8e5m2"], tiny_plan.fp8_gemms


def _record_fp8_scales(grad_scale: float) -> dict:
    """RECORD.md 2.9: X * 2 and W * 32 to e4m3, G * s to e5m2; the forward GEMM rescales by
    1/64, dX by 1/(32 s), dW by 1/(2 s)."""
    from jaxgpt import fp8

    return {"quantize": {"f8e4m3fn": sorted([fp8.X_SCALE, fp8.W_SCALE]), "f8e5m2": [grad_scale]},
            "rescale": {"f8e4m3fn x f8e4m3fn": [1 / (fp8.X_SCALE * fp8.W_SCALE)],
                        "f8e4m3fn x f8e5m2": sorted([1 / (fp8.W_SCALE * grad_scale), 1 / (fp8.X_SCALE * grad_scale)])}}


@needs_plugin
def test_record_head_compiles_to_three_fp8_gemms_with_the_records_scales():
    """The record's head and loss at its shapes (65,536 tokens, chunks of 8,192), fwd+bwd, on
    an H100 plan: exactly the record's three FP8 GEMMs and scales 2, 32, 2^29."""
    from jaxgpt import config as cfg
    from jaxgpt import presets

    record = presets.record_preset()
    # One device's share of the record's batch, as scripts/gpu_plan.py compiles it.
    preset = cfg.Preset(model=record.model, optim=record.optim,
                        train=cfg.replace(record.train, batch_tokens=record.train.seq_len, devices=1))
    plan = gpu_plan.plan_part(preset, "head", "h100")
    assert sorted(plan.fp8_gemms) == ["f8e4m3fn x f8e4m3fn", "f8e4m3fn x f8e5m2", "f8e4m3fn x f8e5m2"], plan.fp8_gemms
    assert record.train.seq_len == 65536 and record.model.fp8_grad_scale == 2.0**29
    assert plan.fp8_scales == _record_fp8_scales(2.0**29)


@needs_plugin
def test_tiny_step_quantizes_with_the_records_scales(tiny_plan):
    """The whole tiny training step: the quantize scales are the record's (s is the config's,
    scaled down for the tiny mean over fewer tokens); XLA splits the tiny gradient GEMMs' long
    contraction (split-K), which moves their rescales out of the fusions, so only the rescales
    found are checked."""
    from jaxgpt import presets
    from jaxgpt import train as train_lib

    want = _record_fp8_scales(train_lib.device_model_config(presets.tiny_preset(), 1).fp8_grad_scale)
    assert tiny_plan.fp8_scales["quantize"] == want["quantize"]
    found = tiny_plan.fp8_scales["rescale"]
    assert found and all(set(values) <= set(want["rescale"][types]) for types, values in found.items()), found


@needs_plugin
def test_pallas_attention_compiles_to_three_triton_kernels_for_an_h100():
    """The kernels lower to Triton (not the CPU interpreter) inside gpu_plan, and Triton accepts
    the default tiles for sm_90a: forward, dQ and dK/dV, with no while loop left from attention."""
    from jaxgpt import config as cfg
    from jaxgpt import presets

    preset = presets.tiny_preset()
    preset = cfg.Preset(model=cfg.replace(preset.model, attention_backend="pallas"), optim=preset.optim, train=preset.train)
    plan = gpu_plan.plan_part(preset, "attention", "h100")
    assert plan.custom_calls == {"__gpu$xla.gpu.triton": 3}
    assert plan.while_loops == 0
    assert plan.flops and plan.roofline_ms["bound"] >= 0


@needs_plugin
@pytest.mark.slow  # two tiny-preset step compiles for 2 devices: about 25 s each on this CPU
def test_muon_collective_option_changes_only_muons_collective_in_the_step_plan():
    """--muon-collective psum (the earlier default) puts Muon's exchange in an all-reduce; the
    record's all_gather puts it in an all-gather. The gradients' pmean is an all-reduce in both."""
    from jaxgpt import config as cfg
    from jaxgpt import presets

    preset = presets.tiny_preset()
    preset = cfg.Preset(model=preset.model, optim=preset.optim,
                        train=cfg.replace(preset.train, batch_tokens=2 * preset.train.seq_len, devices=2))
    gathered = gpu_plan.plan_train_step(preset, "h100", 2, muon_collective="all_gather")
    summed = gpu_plan.plan_train_step(preset, "h100", 2, muon_collective="psum")
    assert gathered.collectives.get("all-gather", 0) > 0 and gathered.collectives.get("all-reduce", 0) > 0
    assert "all-gather" not in summed.collectives
    # Muon's results (NS dtype, one slot per matrix) move from the all-gather into all-reduces.
    assert summed.collective_bytes["all-reduce"] == (
        gathered.collective_bytes["all-reduce"] + gathered.collective_bytes["all-gather"])


def _compile_attention_for_h100(tiles):
    """Forward + backward of the Pallas attention with `tiles`, compiled for a compile-only H100
    at head dim 128 (the record's; shared memory depends on tiles and head dim, not on T)."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import SingleDeviceSharding

    from jaxgpt.kernels.flash_attention import compiled_kernels, flash_attention

    device = SingleDeviceSharding(gpu_plan.compile_only_mesh("h100", 1, "x").devices.flat[0])
    spec = lambda shape, dtype: jax.ShapeDtypeStruct(shape, dtype, sharding=device)
    qkv, ids, window = spec((1, 1024, 2, 128), jnp.bfloat16), spec((1, 1024), jnp.int32), spec((), jnp.int32)

    def fwd_bwd(q, k, v, ids, window):
        loss = lambda q, k, v: flash_attention(q, k, v, ids, window, tiles=tiles).astype(jnp.float32).sum()
        return jax.grad(loss, argnums=(0, 1, 2))(q, k, v)

    with compiled_kernels():
        lowered = jax.jit(fwd_bwd).lower(qkv, qkv, qkv, ids, window)
    return lowered.compile().as_text()


@needs_plugin
@pytest.mark.slow  # two Triton compiles of three kernels: about 10 s on this CPU
def test_per_kernel_tiles_compile_for_an_h100_within_its_shared_memory():
    """The H100 sweep's fastest forward (128/128 tiles, 8 warps) with the backward kernels at their
    defaults compiles for sm_90a; the same compile refuses a setting over the 232,448-byte shared
    memory limit (3 stages for all three kernels), so passing means it fits."""
    from jaxgpt.kernels.flash_attention import KernelTiles, Tiles

    hlo = _compile_attention_for_h100(Tiles(forward=KernelTiles(128, 128, num_warps=8)))
    assert hlo.count("__gpu$xla.gpu.triton") == 3
    with pytest.raises(Exception, match="Shared memory size limit exceeded"):
        _compile_attention_for_h100(Tiles.uniform(num_stages=3))
