"""Compile jaxgpt's full training step for a GPU that is not here and print XLA's plan.

    python scripts/gpu_plan.py [--preset record] [--device h100|h200|a100] [--devices 1|8] [--json]
        [--attention blocked|pallas|mosaic|dense] [--part step|block|attention|head] [--hlo-dir runs/gpu_plan]
        [--muon-collective all_gather|psum]

Needs the jax CUDA plugin (`make gpu-plan` installs the `gpu-aot` extra). Numbers are "compiled
without a GPU, no autotuning": memory and kernel counts of XLA's plan, not timings.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import get_args

from jaxgpt_tools.gpu import compile_plan as gpu_plan

gpu_plan.compile_only_environment()  # before jax is imported (by the imports below)

from jaxgpt import config as cfg  # noqa: E402
from jaxgpt.model import attention_backend  # noqa: E402
from jaxgpt.kernels.flash_attention import compiled_kernels  # noqa: E402
from jaxgpt.muon import Collective  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="record", choices=sorted(cfg.PRESETS))
    parser.add_argument("--device", default="h100", choices=gpu_plan.device_names())
    parser.add_argument("--devices", type=int, default=1, help="compile-only devices in the mesh; each holds batch_tokens / devices tokens")
    parser.add_argument("--batch-tokens", type=int,
                        help="global tokens per step (default: each device gets the preset's batch_tokens / 8, at least one sequence)")
    parser.add_argument("--attention", choices=("blocked", "pallas", "mosaic", "dense"), default=None,
                        help="attention backend (default: the preset's; its 'auto' compiles the Pallas kernel for a GPU)")
    parser.add_argument("--part", choices=gpu_plan.PARTS, default="step",
                        help="the whole training step (default) or one part, forward + backward, on one device")
    parser.add_argument("--muon-collective", choices=get_args(Collective), default="all_gather",
                        help="how Muon shares its Newton-Schulz results between devices (step only; "
                             "all_gather is the record's, psum the earlier default, for before/after plans)")
    parser.add_argument("--hlo-dir", type=Path, default=Path("runs/gpu_plan"), help="where the optimized HLO text is written")
    parser.add_argument("--json", action="store_true", help="print the plan as one JSON object")
    args = parser.parse_args(argv)
    preset = cfg.get_preset(args.preset)
    batch_tokens = args.batch_tokens or max(preset.train.batch_tokens // 8, preset.train.seq_len) * args.devices
    with compiled_kernels():  # the plan is a GPU's: the preset's "auto" resolves as it would there
        attention = args.attention or attention_backend(preset.model)
    model = cfg.replace(preset.model, attention_backend=attention)
    preset = cfg.Preset(model=model, optim=preset.optim,
                        train=cfg.replace(preset.train, batch_tokens=batch_tokens, devices=args.devices))
    if args.part == "step":
        plan = gpu_plan.plan_train_step(preset, args.device, args.devices, muon_collective=args.muon_collective)
    else:
        plan = gpu_plan.plan_part(preset, args.part, args.device)
    args.hlo_dir.mkdir(parents=True, exist_ok=True)
    muon_suffix = "" if args.muon_collective == "all_gather" else f"_muon_{args.muon_collective}"
    hlo_path = (args.hlo_dir / f"{args.preset}_{model.attention_backend}_{args.device}_x{plan.num_devices}_"
                f"{'train_step' + muon_suffix if args.part == 'step' else args.part}.hlo.txt")
    hlo_path.write_text(plan.hlo)
    summary = {"preset": args.preset, "part": args.part, "attention": model.attention_backend,
               "batch_tokens": batch_tokens if args.part == "step" else preset.train.seq_len,
               **({"muon_collective": args.muon_collective} if args.part == "step" else {}),
               **plan.summary(), "hlo": str(hlo_path)}
    if args.json:
        print(json.dumps(summary))
    else:
        for key, value in summary.items():
            print(f"{key:>14}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
