"""The fusion study: how XLA and TorchInductor fuse the record's merged-QKV path, and what merging buys.

    python scripts/fusion_report.py --quick          # the QKV path, small shape, this CPU, both compilers (minutes)
    python scripts/fusion_report.py --write-docs     # the study (make fusion): this CPU at T 256 and 2,048, both
                                                     #   compilers' H100 code compiled without a GPU at T 256 and 65,536,
                                                     #   XLA's dot-merger sweep -> artifacts/fusion/, docs/FUSION.md
    python scripts/fusion_report.py --device cuda --shapes record_gpu --profile-shapes record_gpu --parts qkv \
        --inductor-max-autotune --no-gpu-aot --deadline-s 420 --out runs/fusion-gpu
                                                     # on a GPU machine: both compilers on its GPU, autotuned, timed
                                                     #   per kernel (the lease's command: artifacts/gpu/README.md)
    python scripts/fusion_report.py --from-results artifacts/fusion runs/fusion-gpu --write-docs
                                                     # compile nothing: the page from earlier runs' results

Prints one JSON object (a row per program); progress on stderr. The H100 legs need their venvs
(`make gpu-aot`, `make torch-cuda`; or $JAXGPT_GPU_PYTHON, $JAXGPT_TORCH_CUDA_PYTHON) and say why not without.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from jaxgpt_tools.common import command
from jaxgpt_tools.fusion.report import (
    GPU_LEGS,
    REPO_ROOT,
    check_request,
    load_results,
    run_study,
    study_threads,
    write_outputs,
)
from jaxgpt_tools.fusion.xla import MODES, PARTS, SHAPES, Timing

DEFAULT_GPU_PYTHON = os.environ.get("JAXGPT_GPU_PYTHON", str(REPO_ROOT / ".venv-gpu-aot" / "bin" / "python"))
DEFAULT_TORCH_CUDA_PYTHON = os.environ.get("JAXGPT_TORCH_CUDA_PYTHON", str(REPO_ROOT / ".venv-torch-cuda" / "bin" / "python"))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="the QKV path at the small shape on this CPU only, short timing")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                        help="where both compilers compile and time (cuda: this machine's GPU)")
    parser.add_argument("--shapes", default=None, help=f"shapes on this machine, comma-separated out of {', '.join(SHAPES)} "
                        "(default: small, and record_cpu unless --quick)")
    parser.add_argument("--compilers", default="xla,inductor", help="xla and/or inductor on this machine, or none")
    parser.add_argument("--parts", default=None, help="qkv and/or block (default both, --quick qkv)")
    parser.add_argument("--modes", default=",".join(MODES), help="fwd and/or fwdbwd")
    parser.add_argument("--gpu-aot", action=argparse.BooleanOptionalAction, default=None,
                        help="XLA's and Inductor's H100 code, compiled without a GPU (default: on unless --quick)")
    parser.add_argument("--sweep", action=argparse.BooleanOptionalAction, default=True, help="XLA's dot-merger sweep")
    parser.add_argument("--gpu-compilers", default=",".join(GPU_LEGS),
                        help="the H100 legs to compile: xla, inductor (the columns), xla_gemm (XLA's QKV path with its "
                             "GEMMs as cuBLAS calls), inductor_max_autotune (tried on the smallest shape)")
    parser.add_argument("--gpu-python", default=DEFAULT_GPU_PYTHON, help="python of the venv with the jax CUDA plugin")
    parser.add_argument("--torch-cuda-python", default=DEFAULT_TORCH_CUDA_PYTHON, help="python of the CUDA-torch venv")
    parser.add_argument("--gpu-shapes", default="small,record_gpu", help="shapes for the H100 compiles (the ablation: the last)")
    parser.add_argument("--time-s", type=float, default=None, help="seconds of timed calls per program (3, --quick 0.5; 0: none)")
    parser.add_argument("--idle-wait-s", type=float, default=None,
                        help="seconds to wait for an idle machine before each timed pair (default 60, --quick 0)")
    parser.add_argument("--threads", type=int, default=1,
                        help="cores this process is pinned to, so XLA's pool and torch's threads are equal (default 1)")
    parser.add_argument("--inductor-max-autotune", action="store_true",
                        help="Inductor's programs on this machine compiled again with max_autotune=True (its Triton GEMM "
                             "templates timed against cuBLAS on a GPU), timed beside the default ones")
    parser.add_argument("--deadline-s", type=float, default=None,
                        help="seconds after which this machine's run starts no new program and skips its ablations, so "
                             "that what it made is written (one device command's limit, less the writing)")
    parser.add_argument("--profile-shapes", default="record_cpu", help="shapes also profiled per kernel (or none)")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "runs" / "fusion", help="artifact root (per device below it)")
    parser.add_argument("--write-docs", action="store_true", help="write artifacts/fusion/ and docs/FUSION.md")
    parser.add_argument("--from-results", type=Path, nargs="+", default=None, metavar="DIR",
                        help="compile nothing: the page from every results.json under each DIR (later DIRs win)")
    parser.add_argument("--docs-dir", type=Path, default=REPO_ROOT / "docs", help=argparse.SUPPRESS)
    parser.add_argument("--artifacts-dir", type=Path, default=REPO_ROOT / "artifacts" / "fusion", help=argparse.SUPPRESS)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    command_line = "python scripts/fusion_report.py " + " ".join(sys.argv[1:] if argv is None else argv)  # in the page
    if args.from_results is not None:
        return command.run("fusion_report", lambda: write_outputs(load_results(args.from_results), docs_dir=args.docs_dir,
                                                                  artifacts_dir=args.artifacts_dir, command=command_line))
    shapes, gpu_shapes = args.shapes.split(",") if args.shapes else (["small"] if args.quick else ["small", "record_cpu"]), \
        args.gpu_shapes.split(",")
    compilers = [] if args.compilers == "none" else [c.strip() for c in args.compilers.split(",") if c.strip()]
    parts, modes = args.parts.split(",") if args.parts else (["qkv"] if args.quick else list(PARTS)), args.modes.split(",")
    gpu_legs = tuple(args.gpu_compilers.split(","))
    try:
        check_request(shapes + gpu_shapes, compilers, parts, modes, args.threads)
        if set(gpu_legs) - set(GPU_LEGS):
            raise ValueError(f"unknown H100 leg: {', '.join(sorted(set(gpu_legs) - set(GPU_LEGS)))}")
        if args.inductor_max_autotune and "inductor" not in compilers:
            raise ValueError("--inductor-max-autotune compiles Inductor's programs again: add inductor to --compilers")
        if args.deadline_s is not None and args.deadline_s <= 0:
            raise ValueError(f"--deadline-s must be positive seconds, not {args.deadline_s:g}")
    except ValueError as err:
        command.usage_error(parser, err)
    if args.device == "cpu":
        os.environ["JAX_PLATFORMS"] = "cpu"  # before jax starts: XLA's CPU, even on a GPU machine
    else:  # jax and torch share the GPU: no preallocation of most of its memory by jax
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    time_s, wait = (args.time_s if args.time_s is not None else (0.5 if args.quick else 3.0),
                    args.idle_wait_s if args.idle_wait_s is not None else (0.0 if args.quick else 60.0))
    profile = () if args.quick or args.profile_shapes == "none" else tuple(args.profile_shapes.split(","))
    def study() -> None:
        with study_threads(args.threads, torch_too="inductor" in compilers) as cores:
            print(json.dumps(run_study(
                device=args.device, shapes=shapes, compilers=compilers, parts=parts, modes=modes,
                timing=Timing(target_s=time_s, idle_wait_s=wait) if time_s > 0 else None, threads=args.threads,
                cores=cores, gpu=args.gpu_aot if args.gpu_aot is not None else not args.quick,
                gpu_python=args.gpu_python, torch_cuda_python=args.torch_cuda_python, gpu_shapes=gpu_shapes,
                gpu_compilers=gpu_legs, inductor_max_autotune=args.inductor_max_autotune, deadline_s=args.deadline_s,
                ablation=not args.quick, sweep=args.sweep and not args.quick, profile_shapes=profile, out=args.out,
                write_docs=args.write_docs, docs_dir=args.docs_dir, artifacts_dir=args.artifacts_dir,
                command=command_line)))

    return command.run("fusion_report", study)


if __name__ == "__main__":
    sys.exit(main())
