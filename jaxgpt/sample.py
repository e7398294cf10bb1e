"""Text from a trained model: `python -m jaxgpt.sample --checkpoint PATH --prompt TEXT`.

PATH is a training checkpoint directory (orbax; `python -m jaxgpt.train --save-checkpoint`
writes one and prints this command) or a record-format torch file `{"model": state_dict}`
(read through `jaxgpt.run.convert`; dims inferred from shapes). The prompt is encoded as a
document of the training data, [EOT] + encode(prompt), with the tokenizer named in the
shards' meta.json (the checkpoint's validation shards; `--shards-meta` or `--tokenizer`
otherwise). Generation stops after --max-new-tokens or at an EOT (the next document).

Decoding is incremental: `jaxgpt.decode.logits` runs the model's own layers on one new token
against a key/value cache of every earlier position, with the record's document-causal,
block-windowed mask at absolute positions, so each token's logits equal those of a full
forward pass on the same prefix (tests/test_sample.py). One jitted step serves the prompt
and the generation, so it compiles once. The window is the run's final validation window.
"""

from __future__ import annotations

import argparse
import functools
import glob
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from jaxgpt import config as cfg
from jaxgpt import decode, lineage, schedules
from jaxgpt import loss as loss_lib
from jaxgpt.corpus import build as corpus
from jaxgpt.corpus import tokenizer
from jaxgpt.run import checkpoint, convert, quiet, saved_state

PROG = "python -m jaxgpt.sample"
RECORD_FINAL_WINDOW_BLOCKS = schedules.window_blocks(1393, 1393)[0]  # 14: the record's last validation


@dataclass(frozen=True)
class LoadedModel:
    """A model to sample from: parameters by record name, its config, the attention window
    (W_long, blocks) and the shard folder's meta.json when one is known."""

    params: dict[str, Any]
    config: cfg.ModelConfig
    window_blocks: int
    shards_meta: Path | None


def load_checkpoint(path: str | Path, *, head_dim: int | None = None) -> LoadedModel:
    """Parameters and config from an orbax checkpoint directory or a record-format .pt.

    Raises FileNotFoundError for a missing path or a directory without checkpoints, and
    ValueError for a file that is not a record-format checkpoint."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"checkpoint not found: {path}")
    if path.is_dir():
        params, meta = checkpoint.restore_params(path)
        preset = saved_state.saved_preset(meta["config"], f"--checkpoint {path}")
        train = preset.train
        # The run's last validation window, in its schedule's unit (#15's is tokens).
        window = lineage.stream_variants(train).window(train.steps, max(train.steps, 1), train.window_max_tokens)
        # The val shards' folder, relative to the working directory as in training.
        val_files = sorted(glob.glob(train.val_files))
        shards_meta = Path(val_files[0]).parent / corpus.META_FILE if val_files else None
        return LoadedModel(params, preset.model, window, shards_meta if shards_meta and shards_meta.is_file() else None)
    state_dict, model_config = convert.read_model(path, cfg.ModelConfig(), flag="--checkpoint", head_dim=head_dim)
    params = convert.torch_state_dict_to_params(state_dict, model_config)
    return LoadedModel(params, model_config, RECORD_FINAL_WINDOW_BLOCKS, None)


def choose_tokenizer(loaded: LoadedModel, name: str | None, shards_meta: str | None) -> tokenizer.Tokenizer:
    """--tokenizer, else the meta.json given or found next to the run's val shards, else
    GPT-2 BPE. ValueError when the model's vocabulary cannot hold the tokenizer's ids."""
    if name is not None:
        chosen = tokenizer.tokenizer_for(name)
    elif (meta := shards_meta or loaded.shards_meta) is not None:
        chosen = tokenizer.tokenizer_from_meta(meta)
    else:
        chosen = tokenizer.tokenizer_for(tokenizer.BPE_NAME)
    if loaded.config.vocab_size < cfg.GPT2_VOCAB_SIZE:
        raise ValueError(
            f"vocabulary mismatch: the model has {loaded.config.vocab_size} token rows, the "
            f"{chosen.name} tokenizer uses GPT-2 ids up to {cfg.GPT2_VOCAB_SIZE - 1}"
        )
    return chosen


class Sampler:
    """Incremental decoding of one sequence with a key/value cache of `max_len` positions.

    `feed(token)` runs one token through the model (writing its keys and values) and returns
    the (Vp,) fp32 logits for the next position; `pick(logits, key)` draws the next token.
    Both are jitted once; parameters stay on the device, the cache is donated each step."""

    def __init__(self, params: dict[str, Any], config: cfg.ModelConfig, window_blocks: int, max_len: int,
                 *, temperature: float = 1.0, top_k: int | None = None) -> None:
        import jax
        from flax import nnx

        if max_len > config.rope_max_len:
            raise ValueError(f"{max_len} positions exceed the model's maximum length {config.rope_max_len} (rope_max_len)")
        if temperature < 0:
            raise ValueError(f"--temperature must be >= 0, got {temperature}")
        if top_k is not None and top_k < 1:
            raise ValueError(f"--top-k must be >= 1, got {top_k}")
        model = convert.model_from_params(params, config)
        decode.init_cache(model, batch=1, max_len=max_len)
        cap = model.variants.cap  # the lineage's soft-cap, as the model's loss applies it
        self.graphdef, self.params, *caches = nnx.split(model, nnx.Param, nnx.Cache)
        (self.cache,) = caches  # two filters: the params, then the cache
        self.max_len, self.length = max_len, 0
        self.config, self.window = config, np.int32(window_blocks)
        self.temperature, self.top_k = temperature, top_k
        self._step = jax.jit(self._step_fn, donate_argnums=(1,))
        self._pick = jax.jit(functools.partial(pick_token, vocab_size=config.vocab_size, top_k=top_k,
                                               cap=config.logit_cap, cap_temperature=config.logit_cap_temperature,
                                               cap_kind=cap.kind, cap_rounding=cap.rounding))

    def _step_fn(self, params, cache, token, window):
        from flax import nnx

        model = nnx.merge(self.graphdef, params, cache)
        logits = decode.logits(model, token.reshape(1, 1), window)[0, -1]
        return nnx.state(model, nnx.Cache), logits.astype("float32")

    def feed(self, token: int) -> Any:
        if self.length >= self.max_len:
            raise ValueError(f"the cache holds {self.max_len} positions; cannot feed another token")
        self.cache, logits = self._step(self.params, self.cache, np.int32(token), self.window)
        self.length += 1
        return logits

    def pick(self, logits: Any, key: Any) -> int:
        return int(self._pick(logits, key, np.float32(self.temperature)))


def pick_token(logits: Any, key: Any, temperature: Any, *, vocab_size: int, top_k: int | None,
               cap: float, cap_temperature: float, cap_kind: str = "sigmoid", cap_rounding: str = "once") -> Any:
    """Next token from (Vp,) raw logits: the model's soft-cap (its distribution is the softmax
    of the capped logits), padding ids >= vocab_size excluded, divided by `temperature`
    (0: the most likely token), restricted to the `top_k` most likely. int32 scalar."""
    import jax
    import jax.numpy as jnp

    capped = loss_lib.soft_cap(logits, cap, cap_temperature, cap_kind, cap_rounding)
    capped = jnp.where(jnp.arange(capped.shape[-1]) < vocab_size, capped, -jnp.inf)
    if top_k is not None:
        kth = jax.lax.top_k(capped, min(top_k, vocab_size))[0][-1]
        capped = jnp.where(capped >= kth, capped, -jnp.inf)
    greedy = jnp.argmax(capped)
    drawn = jax.random.categorical(key, capped / jnp.maximum(temperature, 1e-6))
    return jnp.where(temperature > 0, drawn, greedy).astype(jnp.int32)


def generate(sampler: Sampler, prompt_ids: Sequence[int], max_new_tokens: int, seed: int, *,
             eot_id: int = cfg.EOT_ID) -> list[int]:
    """Feed `prompt_ids`, then draw up to `max_new_tokens` tokens (stopping after an EOT).
    Returns the new ids."""
    import jax

    if not prompt_ids:
        raise ValueError("the prompt must hold at least one token")
    for token in prompt_ids:
        logits = sampler.feed(token)
    key = jax.random.key(seed)
    new_ids: list[int] = []
    for index in range(max_new_tokens):
        key, draw_key = jax.random.split(key)
        token = sampler.pick(logits, draw_key)
        new_ids.append(token)
        if token == eot_id or index == max_new_tokens - 1:
            break
        logits = sampler.feed(token)
    return new_ids


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description="Sample text from a jaxgpt checkpoint.")
    parser.add_argument("--checkpoint", required=True, metavar="PATH",
                        help="training checkpoint directory (orbax) or record-format .pt file")
    parser.add_argument("--prompt", default="", help="text to continue (encoded after an EOT, as a document; default empty)")
    parser.add_argument("--max-new-tokens", type=int, default=100, metavar="N", help="tokens to generate at most (default 100)")
    parser.add_argument("--temperature", type=float, default=0.8, metavar="T", help="softmax temperature, 0: greedy (default 0.8)")
    parser.add_argument("--top-k", type=int, default=50, metavar="K", help="draw among the K most likely tokens, 0: all (default 50)")
    parser.add_argument("--seed", type=int, default=0, help="random seed of the draws (default 0)")
    parser.add_argument("--tokenizer", choices=["gpt2", "gpt2-bytes"], help="default: from the shards' meta.json, else gpt2")
    parser.add_argument("--shards-meta", metavar="META.json", help="meta.json of the shards the model was trained on")
    parser.add_argument("--window-blocks", type=int, metavar="W", help="attention window W_long in 128-token blocks "
                        "(default: the run's final validation window; 14 for a .pt)")
    parser.add_argument("--head-dim", type=int, help=".pt only: head width (default: the record's, 128)")
    parser.add_argument("--debug", action="store_true", help="on an error, show the full traceback instead of one line")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Prints the prompt and its continuation on stdout; `error: ...` on stderr and exit 1 for
    a missing checkpoint, a vocabulary mismatch, a prompt too long, or bad flags."""
    args = build_parser().parse_args(argv)
    with quiet.third_party_errors(args.debug):  # orbax's own tracebacks only with --debug
        return sample_main(args)


def sample_main(args: argparse.Namespace) -> int:
    """`main` once the flags are parsed."""
    try:
        if args.max_new_tokens < 1:
            raise ValueError(f"--max-new-tokens must be >= 1, got {args.max_new_tokens}")
        loaded = load_checkpoint(args.checkpoint, head_dim=args.head_dim)
        tok = choose_tokenizer(loaded, args.tokenizer, args.shards_meta)
        prompt_ids = [cfg.EOT_ID, *(int(i) for i in tok(args.prompt))]
        limit = loaded.config.rope_max_len
        if len(prompt_ids) + args.max_new_tokens > limit:
            raise ValueError(
                f"prompt too long: {len(prompt_ids)} tokens (EOT included) + --max-new-tokens "
                f"{args.max_new_tokens} exceed the model's {limit} positions (rope_max_len)"
            )
        window = args.window_blocks if args.window_blocks is not None else loaded.window_blocks
        sampler = Sampler(loaded.params, loaded.config, window, len(prompt_ids) + args.max_new_tokens,
                          temperature=args.temperature, top_k=args.top_k or None)
        print(args.prompt, end="", flush=True)
        new_ids = generate(sampler, prompt_ids, args.max_new_tokens, args.seed)
    except (ValueError, FileNotFoundError, RuntimeError) as error:
        if args.debug:
            raise
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return 1
    # Decoded as a whole (a character may span several tokens); an EOT ends the document.
    text = tok.decode([t for t in new_ids if t != cfg.EOT_ID])
    print(text + ("\n[end of document]" if new_ids and new_ids[-1] == cfg.EOT_ID else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
