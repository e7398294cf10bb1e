"""jaxgpt.kernels.mosaic_attention (Pallas Mosaic GPU) against the `dense` backend, without a GPU.

On a CPU the kernels run in Mosaic GPU's interpreter: shared memory, barriers, TMA copies and
the three warpgroups (two compute, one memory) are simulated as the GPU would run them, so the
list walk, the multi-stage pipeline and its barrier protocol, masking and the fp32 softmax
statistics are the GPU's code. jax 0.10's interpreter cannot run wgmma on a transposed or
register operand nor the register layouts, so those few operations run as plain JAX there
(`jaxgpt.kernels.mosaic_ops.Interpreted`); the wgmma code is checked by lowering here, by ptxas for
sm_90a with the CUDA plugin (the compile tests below) and by the gpu-marked test.

Sizes stay tiny (T = 512 = 4 mask blocks, one head of 64, three sequences in one call) because
the interpreter runs each CTA's threads through host callbacks. The backward kernels walk
64-token steps (two per listed block) and the forward 128-token steps, as by default on the
GPU. Names contain "mosaic" (`pytest -k mosaic`).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxgpt import attention, compat, masks
from jaxgpt.kernels.block_lists import kernel_block_lists
from jaxgpt.kernels.mosaic_attention import (
    MosaicKernelTiles,
    MosaicTiles,
    check_hopper,
    document_bounds,
    mosaic_attention,
)
from jaxgpt.testing import record_like_attention_inputs
from jaxgpt_tools.gpu import compile_plan as gpu_plan

T, HEADS, DIM, CAP = 512, 1, 64, 3
LAYOUTS = {  # EOT positions
    "crossing_block_edges": [5, 130, 131, 300],  # documents straddle block edges; block 2 has no full blocks
    "no_eot": [],
    "starts_with_eot": [0, 400],
}
# One sequence per (layout, window), all in one batch: the kernels walk whatever lists they are
# given, so each sequence gets the lists of its own window and one interpreted call covers all.
CASES = [("crossing_block_edges", 0), ("crossing_block_edges", 1), ("crossing_block_edges", 2),
         ("crossing_block_edges", CAP), ("no_eot", 2)]

needs_plugin = pytest.mark.skipif(not gpu_plan.plugin_available(), reason="jax CUDA plugin not installed (make gpu-plan)")


def _inputs(cases, seed=0):
    """bf16 q, k, v (len(cases), T, HEADS, DIM) and document ids, one sequence per case."""
    rng = np.random.default_rng(seed)
    tokens = rng.integers(0, 1000, size=(len(cases), T))
    for row, (layout, _) in enumerate(cases):
        tokens[row, LAYOUTS[layout]] = 50256
    q, k, v = (jnp.asarray(rng.standard_normal((len(cases), T, HEADS, DIM)), jnp.bfloat16) for _ in range(3))
    return q, k, v, masks.document_ids(jnp.asarray(tokens))


def _lists(cases, ids):
    """Each sequence's kernel lists for its own window, stacked."""
    lists = [kernel_block_lists(ids[row:row + 1], window, max_window_blocks=CAP)
             for row, (_, window) in enumerate(cases)]
    return jax.tree.map(lambda *rows: jnp.concatenate(rows), *lists)


@jax.jit(static_argnums=0)
def _value_and_grads(attend, q, k, v):
    """(output, dq, dk, dv) of attend(q, k, v), the gradients of a position-weighted sum (a
    cotangent of its own for every output row); one forward pass."""
    out, pullback = jax.vjp(attend, q, k, v)
    weights = jnp.sin(jnp.arange(out.shape[1], dtype=jnp.float32))[None, :, None, None]
    return out, *pullback(jnp.broadcast_to(weights, out.shape).astype(out.dtype))


def _dense(cases, ids):
    """The dense backend on each sequence with its own window, stacked."""
    def attend(q, k, v):
        rows = [attention.dense_attention(q[i:i + 1], k[i:i + 1], v[i:i + 1], ids[i:i + 1], window)
                for i, (_, window) in enumerate(cases)]
        return jnp.concatenate(rows)

    return attend


def _rel(a, b):
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    return float(np.abs(a - b).max() / np.abs(b).max())


def _assert_bf16_close(got, want, cases):
    """Per sequence: the Triton kernel's bf16 bounds. Both round p to bf16 for the PV product and
    the output to bf16, so at most about 2 bf16 steps (2 * 2^-8) of the largest output; the
    gradients add bf16 roundings of p, dS and dO products: 2e-2 of the largest entry."""
    for row, case in enumerate(cases):
        assert _rel(got[0][row], want[0][row]) <= 2 * 2.0**-8, case
        for name, g, r in zip(("dq", "dk", "dv"), got[1:], want[1:]):
            assert _rel(g[row], r[row]) < 2e-2, (case, name)


@pytest.mark.slow  # the interpreter: about 25 s of CPU for forward, dQ and dK/dV over 5 sequences
def test_mosaic_outputs_and_gradients_equal_dense_for_windows_0_1_2_and_the_cap():
    q, k, v, ids = _inputs(CASES)
    lists = _lists(CASES, ids)
    compat.reset_gpu_interpreter()
    mosaic = lambda q, k, v: mosaic_attention(q, k, v, ids, 0, max_window_blocks=CAP, lists=lists)
    got = _value_and_grads(mosaic, q, k, v)
    _assert_bf16_close(got, _value_and_grads(_dense(CASES, ids), q, k, v), CASES)


@pytest.mark.slow  # race detection keeps vector clocks per access: about 5 s of CPU
def test_mosaic_pipeline_has_no_data_race_and_128_token_backward_steps_agree():
    """The interpreter's race detector follows every shared-memory access of the three
    warpgroups through the barriers: none races. Backward steps of a whole 128-token block
    (the forward's) and 3 stages give the same results."""
    cases = [("crossing_block_edges", 2)]
    q, k, v, ids = _inputs(cases)
    compat.reset_gpu_interpreter()
    tiles = MosaicTiles(dq=MosaicKernelTiles(128, 3), dkdv=MosaicKernelTiles(128, 2))
    mosaic = lambda q, k, v: mosaic_attention(q, k, v, ids, 2, max_window_blocks=CAP, tiles=tiles,
                                              interpret=compat.gpu_interpret_params(detect_races=True))
    got = _value_and_grads(mosaic, q, k, v)
    assert not compat.gpu_interpreter_races_found()
    _assert_bf16_close(got, _value_and_grads(_dense(cases, ids), q, k, v), cases)


# The forward's variants: the pingpong schedule at a 128-token step (one per listed block) and
# at a 64-token one with 3 stages (two steps per block, so a block's mask spans two steps and the
# ring wraps mid-block) walking all 4 query blocks in one CTA; 2 blocks per CTA free-running.
FORWARD_VARIANTS = [MosaicKernelTiles(128, 2, pingpong=True), MosaicKernelTiles(64, 3, pingpong=True, query_blocks=4),
                    MosaicKernelTiles(128, 2, query_blocks=2)]
_variant_id = lambda tiles: f"step{tiles.step}_stages{tiles.stages}_pingpong{tiles.pingpong:d}_blocks{tiles.query_blocks}"


@pytest.mark.slow  # race-detected interpreter: about 20-30 s of CPU each
@pytest.mark.parametrize("forward", FORWARD_VARIANTS, ids=_variant_id)
def test_mosaic_forward_variants_have_no_race_and_equal_dense(forward):
    """Taking turns (one more barrier, the next keys waited for during PV) and walking several
    query blocks per CTA (one ring across them, the tiles refilled after each block's store):
    no shared-memory race, no deadlock, and the output and log-sum-exp (through the
    gradients, which read it) within the bf16 bounds of the default forward."""
    cases = [("crossing_block_edges", 2), ("crossing_block_edges", 0)]
    q, k, v, ids = _inputs(cases)
    lists = _lists(cases, ids)
    compat.reset_gpu_interpreter()
    mosaic = lambda q, k, v: mosaic_attention(q, k, v, ids, 0, max_window_blocks=CAP, lists=lists,
                                              tiles=MosaicTiles(forward=forward),
                                              interpret=compat.gpu_interpret_params(detect_races=True))
    got = _value_and_grads(mosaic, q, k, v)
    assert not compat.gpu_interpreter_races_found()
    _assert_bf16_close(got, _value_and_grads(_dense(cases, ids), q, k, v), cases)


@pytest.mark.slow  # one interpreted forward
def test_mosaic_is_the_attention_backend():
    cases = [("starts_with_eot", 2)]
    q, k, v, ids = _inputs(cases)
    compat.reset_gpu_interpreter()
    got = attention.attention(q, k, v, ids, 2, backend="mosaic", max_window_blocks=CAP)
    assert _rel(got, _dense(cases, ids)(q, k, v)) <= 2 * 2.0**-8  # the bf16 output bound above


def test_mosaic_document_bounds_are_each_tokens_first_and_last_document_token():
    ids = masks.document_ids(jnp.asarray([[1, 50256, 3, 4, 50256, 50256, 7, 8]]))
    bounds = document_bounds(ids)
    np.testing.assert_array_equal(bounds.start, [[0, 1, 1, 1, 4, 5, 5, 5]])
    np.testing.assert_array_equal(bounds.end, [[0, 3, 3, 3, 4, 7, 7, 7]])


def test_mosaic_bad_input_gets_a_clear_error():
    q, k, v, ids = _inputs(CASES[:3])
    with pytest.raises(ValueError, match="takes bfloat16 or float16 .* got q in float32; use the pallas backend"):
        mosaic_attention(q.astype(jnp.float32), k, v, ids, 1)
    narrow = q[..., :32]
    with pytest.raises(ValueError, match=r"head dims equal and in \(64, 128\), got 32 and 32"):
        mosaic_attention(narrow, narrow, narrow, ids, 1)
    with pytest.raises(ValueError, match="128-token mask block .* got block_size=64"):
        mosaic_attention(q, k, v, ids, 1, block_size=64)
    with pytest.raises(ValueError, match="mosaic dkdv.step=32 must be 64 or 128"):
        mosaic_attention(q, k, v, ids, 1, tiles=MosaicTiles(dkdv=MosaicKernelTiles(step=32)))
    with pytest.raises(ValueError, match=r"mosaic dq\.pingpong: only the forward kernel takes turns"):
        mosaic_attention(q, k, v, ids, 1, tiles=MosaicTiles(dq=MosaicKernelTiles(64, 2, pingpong=True)))
    with pytest.raises(ValueError, match=r"mosaic dkdv\.query_blocks=2: only the forward kernel walks"):
        mosaic_attention(q, k, v, ids, 1, tiles=MosaicTiles(dkdv=MosaicKernelTiles(64, 2, query_blocks=2)))
    with pytest.raises(ValueError, match=r"mosaic forward\.query_blocks=3 must divide the 4 mask blocks of T=512"):
        mosaic_attention(q, k, v, ids, 1, tiles=MosaicTiles(forward=MosaicKernelTiles(query_blocks=3)))
    with pytest.raises(ValueError, match="mosaic forward.stages=1 must be >= 2"):
        mosaic_attention(q, k, v, ids, 1, tiles=MosaicTiles(forward=MosaicKernelTiles(stages=1)))
    other = jax.eval_shape(lambda: kernel_block_lists(jnp.zeros((3, 1024), jnp.int32), 1))  # only shapes are read
    with pytest.raises(ValueError, match=r"block list kv.kv_num_blocks has shape \(3, 8\); T=512 needs \(B, N\)"):
        mosaic_attention(q, k, v, ids, 1, lists=other)


def test_mosaic_refuses_a_gpu_other_than_hopper_by_name():
    for hopper in ("9.0", None):  # an H100 or H200; no GPU device (compile-only, interpreted)
        check_hopper(hopper)
    for other in ("8.0", "10.0"):  # A100; Blackwell (tcgen05, no wgmma)
        with pytest.raises(ValueError, match=f"needs a Hopper GPU .* this one has {other}; use --attention pallas"):
            check_hopper(other)


def _record_shaped_fwd_bwd(seq_len, heads, tiles=MosaicTiles(), sharding=None):
    """(function, abstract arguments) of forward + backward of the kernels at D 128, bf16."""
    spec = lambda shape, dtype: jax.ShapeDtypeStruct(shape, dtype, sharding=sharding)
    qkv, ids, window = spec((1, seq_len, heads, 128), jnp.bfloat16), spec((1, seq_len), jnp.int32), spec((), jnp.int32)

    def fwd_bwd(q, k, v, ids, window):
        loss = lambda q, k, v: mosaic_attention(q, k, v, ids, window, tiles=tiles, interpret=False)
        return jax.grad(lambda q, k, v: loss(q, k, v).astype(jnp.float32).sum(), argnums=(0, 1, 2))(q, k, v)

    return fwd_bwd, (qkv, qkv, qkv, ids, window)


def test_mosaic_kernels_lower_to_mosaic_gpu_for_a_gpu_on_this_cpu():
    """Lowering for CUDA needs no GPU: forward, dQ and dK/dV become three Mosaic GPU custom
    calls (wgmma on register and transposed operands, layouts and TMA all lower)."""
    fwd_bwd, args = _record_shaped_fwd_bwd(1024, 2)
    text = compat.lower_for_gpu(jax.jit(fwd_bwd), *args).as_text()
    assert text.count("@mosaic_gpu_v2(") == 3


@pytest.mark.parametrize("forward", FORWARD_VARIANTS, ids=_variant_id)
def test_mosaic_forward_variants_lower_for_a_gpu_on_this_cpu(forward):
    """Each forward variant lowers to Mosaic GPU for an H100 (the turn barrier, the waits
    inside a wgmma's scope, the loop over query blocks), beside the default backward kernels."""
    fwd_bwd, args = _record_shaped_fwd_bwd(1024, 2, tiles=MosaicTiles(forward=forward))
    text = compat.lower_for_gpu(jax.jit(fwd_bwd), *args).as_text()
    assert text.count("@mosaic_gpu_v2(") == 3


@needs_plugin
@pytest.mark.slow  # the forward through ptxas for sm_90a: about 5-10 s each on this CPU
@pytest.mark.parametrize("forward", FORWARD_VARIANTS, ids=_variant_id)
def test_mosaic_forward_variants_compile_for_an_h100_at_the_record_shapes(forward):
    """T 65,536, 6 heads of 128: each forward variant passes ptxas for sm_90a and the shared
    memory check (the default's ring and tiles, plus the pingpong's one barrier)."""
    from jax.sharding import SingleDeviceSharding

    device = SingleDeviceSharding(gpu_plan.compile_only_mesh("h100", 1, "x").devices.flat[0])
    spec = lambda shape, dtype: jax.ShapeDtypeStruct(shape, dtype, sharding=device)
    qkv = spec((1, 65536, 6, 128), jnp.bfloat16)
    forward_only = lambda q, k, v, ids, window: mosaic_attention(
        q, k, v, ids, window, tiles=MosaicTiles(forward=forward), interpret=False)
    hlo = jax.jit(forward_only).lower(qkv, qkv, qkv, spec((1, 65536), jnp.int32), spec((), jnp.int32)).compile()
    assert hlo.as_text().count('custom_call_target="mosaic_gpu_v2"') == 1


@needs_plugin
@pytest.mark.slow  # the three kernels through ptxas for sm_90a: about 25 s on this CPU
def test_mosaic_kernels_compile_for_an_h100_at_the_record_shapes_within_shared_memory():
    """T 65,536, 6 heads of 128: the three kernels compile for sm_90a (ptxas runs at compile
    time); the same compile refuses a forward with 4 stages (over the 232,448 bytes of shared
    memory per block), so passing means the defaults fit."""
    from jax.sharding import SingleDeviceSharding

    device = SingleDeviceSharding(gpu_plan.compile_only_mesh("h100", 1, "x").devices.flat[0])
    fwd_bwd, args = _record_shaped_fwd_bwd(65536, 6, sharding=device)
    hlo = jax.jit(fwd_bwd).lower(*args).compile().as_text()
    assert hlo.count('custom_call_target="mosaic_gpu_v2"') == 3
    too_deep = MosaicTiles(forward=MosaicKernelTiles(step=128, stages=4))
    fwd_bwd, args = _record_shaped_fwd_bwd(65536, 6, tiles=too_deep, sharding=device)
    with pytest.raises(Exception, match="exceeds available shared memory"):
        jax.jit(fwd_bwd).lower(*args).compile()


@pytest.mark.gpu
def test_mosaic_on_gpu_matches_dense_at_8192_and_blocked_at_65536():
    rng = np.random.default_rng(0)
    for seq_len, reference, windows in ((8192, attention.dense_attention, (1, 7, 14)),
                                        (65536, attention.blocked_attention, (1, 14))):
        ids, q, k, v = record_like_attention_inputs(seq_len, rng)
        for window in windows:
            got = _value_and_grads(lambda q, k, v: mosaic_attention(q, k, v, ids, window), q, k, v)
            want = _value_and_grads(lambda q, k, v, reference=reference: reference(q, k, v, ids, window), q, k, v)
            _assert_bf16_close(got, want, [(f"T {seq_len}", window)])


@needs_plugin
@pytest.mark.slow  # the record step's compile: about 40 s of CPU (130 s on this loaded machine) and 6.4 GB
def test_mosaic_record_step_compiles_for_an_h100():
    """The record's training step (one device, one 65,536-token sequence) with `--attention
    mosaic`: three Mosaic GPU kernels per attention layer and no Triton attention kernel."""
    from jaxgpt import config as cfg
    from jaxgpt import presets

    preset = presets.get_preset("record")
    preset = cfg.Preset(model=cfg.replace(preset.model, attention_backend="mosaic"), optim=preset.optim,
                        train=cfg.replace(preset.train, batch_tokens=preset.train.seq_len, devices=1))
    plan = gpu_plan.plan_train_step(preset, "h100", 1)
    layers = sum(preset.model.has_attention(layer) for layer in range(preset.model.num_layers))
    assert plan.custom_calls == {"mosaic_gpu_v2": 3 * layers}
