"""What both trainers' command lines share: the flag types (a switch, `parse_bool`; the
`--profile START:STOP` window, `parse_profile_window`) and the flags that are not config fields
(`add_run_flags`). The config flags are derived from the configs (runkit.flags)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from runkit import names


def parse_bool(text: str) -> bool:
    lowered = text.lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def parse_profile_window(text: str) -> tuple[int, int]:
    """"START:STOP" (or one step "S") -> (START, STOP), train-line step numbers, both included."""
    start, sep, stop = text.partition(":")
    try:
        window = (int(start), int(stop)) if sep else (int(text), int(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected START:STOP (train-line step numbers, e.g. 2:3), got {text!r}") from None
    if not 1 <= window[0] <= window[1]:
        raise argparse.ArgumentTypeError(f"need 1 <= START <= STOP (steps count from 1, as the train lines), got {text!r}")
    return window


def add_run_flags(parser: argparse.ArgumentParser, presets: Sequence[str], preset_help: str, profiler: str) -> None:
    """The flags both trainers take that are not config fields, with one spelling and meaning:
    the preset, where the run starts from and what it writes, and how it reports. `profiler`
    says which profiler --profile runs and where its trace goes."""
    parser.add_argument("--preset", choices=sorted(presets), default="record", help=preset_help)
    parser.add_argument("--init-from", metavar="CKPT.pt",
                        help="start from this record-format torch checkpoint {'model': state_dict}; model dims are "
                        "inferred from it")
    parser.add_argument("--head-dim", type=int, metavar="N",
                        help="with --init-from: heads = model_dim / N (default: the preset's head width)")
    parser.add_argument("--save-checkpoint", action="store_true",
                        help="save the final state into the run's checkpoint folder even when --checkpoint-every is 0 "
                        "(--resume continues from it)")
    parser.add_argument("--export-torch", metavar="PATH",
                        help="after training, write the parameters as a record-format torch checkpoint "
                        "{'model': state_dict} (--init-from reads it; with --steps 0: the initial state)")
    parser.add_argument("--run-id", type=names.argparse_name("--run-id"), metavar="NAME",
                        help="name of this run's log files and checkpoint folder, a plain name (default: a random uuid)")
    parser.add_argument("--debug", action="store_true", help="on an error, show the full traceback instead of one line")
    parser.add_argument("--allow-nonfinite-loss", action="store_true",
                        help="train on through a NaN or infinite loss (by default the run stops within two steps "
                        "of one, exit 1, and saves nothing after it)")
    parser.add_argument("--verify-shards", action="store_true", help="hash every shard the run reads against the "
                        "SHA-256 its folder's meta.json records (by default a shard is hashed once per file identity: "
                        "path, inode, size, mtime, ctime)")
    parser.add_argument("--profile", metavar="START:STOP", type=parse_profile_window,
                        help=f"trace the steps whose train lines read step:START .. step:STOP with {profiler} "
                        "(scripts/trace_kernels.py ranks its kernels)")
    parser.add_argument("--tensorboard", metavar="DIR", help="also write the metrics JSONL's numbers as TensorBoard "
                        "events into DIR/RUN_ID (tensorboard --logdir DIR shows every run there)")
