"""Run one record-format checkpoint through torch_ref and jaxgpt and compare logits and loss.

    python scripts/compare_checkpoint.py CKPT.pt --tokens SHARD.bin --window-blocks 14 --json \
        [--dump-logits OUT.npz] [--seq-len T] [--head-dim 128]

CKPT is a torch file holding {"model": state_dict} (keys may carry `_orig_mod.`, tensors fp32 or
bf16); model dims come from the shapes. Both models run in eval mode and all-fp32 (plain head, no
FP8) on the first T+1 tokens of the shard (inputs: the first T, targets: the last T), T being the
largest multiple of 128 that fits unless --seq-len is given. Prints one JSON object (--json) or
a short summary. --dump-logits writes the (T, Vp) logits before the soft-cap as arrays `torch`
and `jax`. Memory: the logits are T x Vp fp32 per framework (13 GB each at T = 65536).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(REPO_ROOT))

import numpy as np  # noqa: E402

from jaxgpt.config import BLOCK_SIZE, EOT_ID  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint", type=Path, help='torch file holding {"model": state_dict}')
    parser.add_argument("--tokens", type=Path, required=True, help="token shard (.bin, record format)")
    parser.add_argument("--window-blocks", type=int, required=True, help="W_long in 128-token blocks (W_short = W // 2)")
    parser.add_argument("--seq-len", type=int, default=None, help="T (multiple of 128); default: largest that fits")
    parser.add_argument("--head-dim", type=int, default=128, help="head dim used to infer the number of heads")
    parser.add_argument("--eot-id", type=int, default=None,
                        help=f"document separator token (default {EOT_ID}; required for vocabularies smaller than GPT-2's)")
    parser.add_argument("--attention-backend", choices=("blocked", "dense"), default="blocked",
                        help="jaxgpt attention backend")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--dump-logits", type=Path, default=None, help="write torch/jax logits (T, Vp) to this .npz")
    return parser.parse_args(argv)


def choose_seq_len(num_tokens: int, requested: int | None) -> int:
    """T: `requested` (validated) or the largest multiple of 128 with T + 1 <= num_tokens."""
    if requested is None:
        seq_len = (num_tokens - 1) // BLOCK_SIZE * BLOCK_SIZE
        if seq_len <= 0:
            raise ValueError(f"the shard has {num_tokens} tokens; at least {BLOCK_SIZE + 1} are needed")
        return seq_len
    if requested <= 0 or requested % BLOCK_SIZE:
        raise ValueError(f"--seq-len {requested} is not a positive multiple of {BLOCK_SIZE}")
    if requested + 1 > num_tokens:
        raise ValueError(f"--seq-len {requested} needs {requested + 1} tokens; the shard has {num_tokens}")
    return requested


def load_state_dict(path: Path) -> dict:
    import torch

    if not path.is_file():
        raise ValueError(f"checkpoint {path} does not exist")
    payload = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(payload, dict) or "model" not in payload:
        raise ValueError(f'checkpoint {path} is not in the record format {{"model": state_dict}}')
    return payload["model"]


def run_torch(state_dict: dict, config, inputs: np.ndarray, targets: np.ndarray, window: int):
    """torch_ref in fp32 eval mode: ((T, Vp) fp32 logits before the soft-cap, loss)."""
    import torch

    from torch_ref import model as torch_model

    gpt = torch_model.GPT(
        config.vocab_size, config.num_layers, config.num_heads, config.model_dim, fp8_head=False,
        eot_id=config.eot_id, attention_free_layers=config.attention_free_layers,
    )
    torch_model.load_record_state_dict(gpt, state_dict)  # casts to the model's fp32
    gpt.eval()
    captured = {}
    handle = gpt.lm_head.register_forward_hook(lambda _m, _i, out: captured.setdefault("logits", out))
    with torch.inference_mode():
        loss = gpt(torch.from_numpy(inputs), torch.from_numpy(targets.astype(np.int64)), window)
    handle.remove()
    return captured["logits"][0].float().numpy(), float(loss)


def run_jax(state_dict: dict, config, inputs: np.ndarray, targets: np.ndarray, window: int):
    """jaxgpt in the fp32 policy: ((T, Vp) fp32 logits before the soft-cap, loss)."""
    import jax.numpy as jnp
    from flax import nnx

    from jaxgpt import convert
    from jaxgpt import model as jax_model

    model = jax_model.GPT(config, rngs=nnx.Rngs(0))
    convert.load_params(model, convert.torch_state_dict_to_params(state_dict, config))

    @nnx.jit
    def logits_and_loss(model, inputs, targets):
        return model.logits(inputs, window, train=False)[0], model(inputs, targets, window, train=False)

    logits, loss = logits_and_loss(model, jnp.asarray(inputs)[None], jnp.asarray(targets)[None])
    return np.asarray(logits, np.float32), float(loss)


def compare(args: argparse.Namespace) -> dict:
    from jaxgpt import convert
    from jaxgpt.data import read_shard

    if args.window_blocks < 0:
        raise ValueError(f"--window-blocks must be >= 0, got {args.window_blocks}")
    tokens = read_shard(args.tokens)
    seq_len = choose_seq_len(len(tokens), args.seq_len)
    chunk = np.asarray(tokens[: seq_len + 1], dtype=np.int32)
    inputs, targets = chunk[:-1], chunk[1:]

    state_dict = convert.strip_compile_prefix(load_state_dict(args.checkpoint))
    eot = {} if args.eot_id is None else {"eot_id": args.eot_id}
    config = convert.config_from_state_dict(
        state_dict, head_dim=args.head_dim, **eot, dtype_policy="fp32",
        attention_backend=args.attention_backend, max_window_blocks=max(args.window_blocks, 1),
    )
    start = time.perf_counter()
    torch_logits, torch_loss = run_torch(state_dict, config, inputs, targets, args.window_blocks)
    torch_seconds = time.perf_counter() - start
    start = time.perf_counter()
    jax_logits, jax_loss = run_jax(state_dict, config, inputs, targets, args.window_blocks)
    jax_seconds = time.perf_counter() - start

    diff = np.abs(jax_logits - torch_logits)
    scale = float(np.abs(torch_logits).max())
    if args.dump_logits is not None:
        np.savez(args.dump_logits, torch=torch_logits, jax=jax_logits)
    return {
        "torch_loss": torch_loss,
        "jax_loss": jax_loss,
        "loss_abs_diff": abs(jax_loss - torch_loss),
        "loss_rel_diff": abs(jax_loss - torch_loss) / abs(torch_loss) if torch_loss else None,
        "max_abs_logit_diff": float(diff.max()),
        "mean_abs_logit_diff": float(diff.mean()),
        "max_abs_logit": scale,
        "max_logit_diff_over_max_logit": float(diff.max()) / scale if scale else None,
        "argmax_agreement": float(np.mean(jax_logits.argmax(-1) == torch_logits.argmax(-1))),
        "seq_len": seq_len,
        "window_blocks": args.window_blocks,
        "model": {"vocab_size": config.vocab_size, "padded_vocab_size": config.padded_vocab_size,
                  "num_layers": config.num_layers, "num_heads": config.num_heads,
                  "model_dim": config.model_dim, "attention_free_layers": list(config.attention_free_layers)},
        "jax_attention_backend": args.attention_backend,
        "torch_seconds": round(torch_seconds, 3),
        "jax_seconds": round(jax_seconds, 3),
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        result = compare(args)
    except (ValueError, FileNotFoundError) as err:
        print(f"compare_checkpoint: error: {err}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(result))
    else:
        print(f"T={result['seq_len']} W={result['window_blocks']}: torch_loss {result['torch_loss']:.6f}  "
              f"jax_loss {result['jax_loss']:.6f}  max |logit diff| {result['max_abs_logit_diff']:.3g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
