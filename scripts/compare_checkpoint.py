"""Run one record-format checkpoint through torch_ref and jaxgpt and compare logits and loss.

    python scripts/compare_checkpoint.py CKPT.pt --tokens SHARD.bin --window-blocks 14 --json \
        [--dump-logits OUT.npz] [--seq-len T] [--head-dim 128] [--val-tokens N] [--dtype bf16]
    python scripts/compare_checkpoint.py CKPT.pt --preset NAME --tokens SHARD.bin \
        [--window-blocks W | --window-tokens N] --head-dim 128 --json   (an earlier record's checkpoint)

How dims, the head count, T and the validation loss are chosen: jaxgpt_tools/parity/compare_checkpoint.py.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from jaxgpt.config import EOT_ID
from jaxgpt.presets import LINEAGE_PRESETS, PRESET_ALIASES
from jaxgpt_tools.common import command
from jaxgpt_tools.parity.compare_checkpoint import compare


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint", type=Path, help='torch file holding {"model": state_dict}')
    parser.add_argument("--tokens", type=Path, required=True, help="token shard (.bin, record format)")
    parser.add_argument("--preset", choices=sorted([*LINEAGE_PRESETS, *PRESET_ALIASES]), default=None,
                        help="the record whose own code saved CKPT: " + ", ".join(
                            f"{name} (#{number})" for name, (number, _, _) in LINEAGE_PRESETS.items())
                        + "; default: the record's model with the checkpoint's dims")
    parser.add_argument("--window-blocks", type=int, default=None,
                        help="W_long in 128-token blocks (W_short = W // 2); #18 and #20 (and no --preset)")
    parser.add_argument("--window-tokens", type=int, default=None,
                        help="#15's token window sw (its block window is ceil(sw / 128)); --preset unet-value-embeds")
    parser.add_argument("--seq-len", type=int, default=None,
                        help="T (multiple of 128); default: largest that fits, or min(N, 65536) with --val-tokens N")
    parser.add_argument("--head-dim", type=int, default=None,
                        help="heads = D // head_dim; default: the checkpoint's saved config, else the preset of that width")
    parser.add_argument("--eot-id", type=int, default=None,
                        help=f"document separator token (default {EOT_ID}; required for vocabularies smaller than GPT-2's)")
    parser.add_argument("--attention-backend", choices=("blocked", "dense"), default="blocked",
                        help="jaxgpt attention backend")
    parser.add_argument("--dtype", choices=("fp32", "bf16"), default="fp32",
                        help="fp32: all fp32, plain head; bf16: the record's eval policy (bf16 activations, bf16 head)")
    parser.add_argument("--val-tokens", type=int, default=None, metavar="N",
                        help="also the record's validation loss over the first N tokens of the shard, in both frameworks")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--dump-logits", type=Path, default=None, help="write torch/jax logits (T, Vp) to this .npz")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)

    def run() -> None:
        result = compare(args.checkpoint, args.tokens, window_blocks=args.window_blocks, seq_len=args.seq_len,
                         head_dim=args.head_dim, eot_id=args.eot_id, attention_backend=args.attention_backend,
                         dtype=args.dtype, val_tokens=args.val_tokens, dump_logits=args.dump_logits,
                         preset=args.preset, window_tokens=args.window_tokens)
        if args.json:
            print(json.dumps(result))
            return
        window = result["window_tokens"] if result["window_tokens"] is not None else result["window_blocks"]
        print(f"{result['preset']} T={result['seq_len']} window={window} {args.dtype}: torch_loss {result['torch_loss']:.6f}  "
              f"jax_loss {result['jax_loss']:.6f}  max |logit diff| {result['max_abs_logit_diff']:.3g}")
        if "torch_val_loss" in result:
            print(f"val over {result['val_tokens']} tokens: torch_ref {result['torch_val_loss']:.6f}  "
                  f"jaxgpt {result['jax_val_loss']:.6f}")

    return command.run("compare_checkpoint", run)


if __name__ == "__main__":
    sys.exit(main())
