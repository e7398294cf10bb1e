"""A record-format checkpoint through torch_ref and jaxgpt, logits and loss compared: the library of
`scripts/compare_checkpoint.py` (the flags named here are that command's).

CKPT is a torch file holding {"model": state_dict} (keys may carry `_orig_mod.`, tensors fp32 or
bf16); model dims come from the shapes, through jaxgpt.run.convert.model_config_from_state_dict (the rule
--init-from uses). Shapes do not say how D splits into heads: the head dim is --head-dim, else
the checkpoint's saved config (torch_ref.train writes one), else the head dim of the preset of
that width (128 for D 768, 64 for D 128); any other width without --head-dim is refused.
Both models run in eval mode on the first T+1 tokens of the shard (inputs: the first T, targets:
the last T), T being the largest multiple of 128 that fits unless --seq-len is given; --dtype fp32
(default) is all-fp32 with a plain head, --dtype bf16 the record's eval policy (bf16 embeddings
and activations, plain bf16 head). --val-tokens N adds the record's validation loss over the first
N tokens of the shard in both frameworks: N / T sequences of T tokens (--seq-len, default
min(N, 65536)), the mean of the per-sequence mean losses. Prints one JSON object (--json) or a
short summary. --dump-logits writes the (T, Vp) logits before the soft-cap as arrays `torch`
and `jax`. Memory: the logits are T x Vp fp32 per framework (13 GB each at T = 65536).

--preset NAME reads a checkpoint saved by that record's own code (#8 untie-embed, #9 shortcuts,
#15 unet-value-embeds, #18 softcap, #20 record; its state-dict names, jaxgpt.run.convert.to_model_names)
into that preset's model, and takes the window as that record's forward does: --window-blocks W
(#18, #20), --window-tokens N (#15's token window), none for #8/#9, whose dense causal attention
runs over T = the preset's 1024-token rows unless --seq-len says otherwise. --dtype bf16 is then
the preset's own policy (autocast for #8/#9, the bf16 model for #15, the record's for #18).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from jaxgpt.config import BLOCK_SIZE

RECORD_VAL_SEQ_LEN = 65536  # tokens of one validation sequence per rank in the record


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


def check_val_tokens(val_tokens: int, seq_len: int, num_tokens: int) -> None:
    """N must be whole sequences, and the record's advance rule (pos + T + 1 < len before each
    sequence) must let the shard serve all of them: N + 2 tokens at least."""
    if val_tokens <= 0 or val_tokens % seq_len:
        raise ValueError(f"--val-tokens {val_tokens} is not a positive multiple of the sequence length {seq_len}")
    if val_tokens + 2 > num_tokens:
        raise ValueError(f"--val-tokens {val_tokens} needs {val_tokens + 2} tokens of the shard "
                         f"(the record's shard-advance rule); it has {num_tokens}")


def choose_head_dim(state_dict: dict, payload: dict, requested: int | None) -> tuple[int, str]:
    """(head dim, where it came from). Shapes fix D but not how D splits into heads, so a
    guess could load a model silently wrong (a 64-dim-head checkpoint read with 128 changes the
    loss): --head-dim, else the saved config's num_heads, else the preset of that width; refuse
    otherwise."""
    from jaxgpt.presets import PRESETS

    if requested is not None:
        return requested, "--head-dim"
    if "embed.weight" not in state_dict:
        raise ValueError("state dict has no `embed.weight`; cannot infer the model dims")
    shape = tuple(state_dict["embed.weight"].shape)
    if len(shape) != 2:
        raise ValueError(f"embed.weight has shape {shape}; expected (vocabulary, width)")
    width = int(shape[1])
    saved = payload.get("config")
    saved_model = saved.get("model") if isinstance(saved, dict) else None
    saved_heads = saved_model.get("num_heads") if isinstance(saved_model, dict) else None
    if (type(saved_heads) is int and saved_heads > 0 and width % saved_heads == 0
            and isinstance(saved_model, dict) and saved_model.get("model_dim") == width):
        return width // saved_heads, "the checkpoint's saved config"
    widths = {name: build().model for name, build in PRESETS.items()}
    matches = sorted({model.head_dim for model in widths.values() if model.model_dim == width})
    if len(matches) == 1:
        name = next(n for n, model in widths.items() if model.model_dim == width)
        return matches[0], f"the {name} preset (width {width})"
    raise ValueError(
        f"cannot tell how many heads a {width}-wide model has: its shapes do not say, it has no saved config, "
        f"and no preset has that width; pass --head-dim"
    )


class TorchModel:
    """torch_ref's GPT holding the checkpoint, eval mode, under `config`'s dtype policy (fp32, or
    the preset's bf16 eval policy), on `device` (compiled flex_attention on CUDA)."""

    def __init__(self, state_dict: dict, config, window: int, device: str = "cpu") -> None:
        from torch_ref import model as torch_model
        from torch_ref.run import convert as torch_convert

        self.window = window
        self.gpt = torch_model.GPT.from_config(config, fp8_head=False)
        torch_model.apply_dtype_policy(self.gpt, config.dtype_policy)
        torch_convert.load_record_state_dict(self.gpt, state_dict)  # casts to the model's dtypes
        self.device = device
        self.gpt.to(device).eval()

    def logits_and_loss(self, inputs: np.ndarray, targets: np.ndarray) -> tuple[np.ndarray, float]:
        """(T,) int inputs and targets -> ((T, Vp) fp32 logits before the soft-cap, loss)."""
        captured: dict[str, Any] = {}
        handle = self.gpt.lm_head.register_forward_hook(lambda _m, _i, out: captured.setdefault("logits", out))
        loss = self.loss(inputs, targets)
        handle.remove()
        return captured["logits"][0].float().cpu().numpy(), loss

    def loss(self, inputs, targets) -> float:
        """Mean loss of one (T,) int sequence (numpy or torch)."""
        import torch

        with torch.inference_mode():
            inputs, targets = torch.as_tensor(inputs).to(self.device), torch.as_tensor(targets).to(self.device, torch.int64)
            return float(self.gpt(inputs, targets, self.window))


class JaxModel:
    """jaxgpt's GPT holding the checkpoint; `config.dtype_policy` says fp32 or record (bf16)."""

    def __init__(self, state_dict: dict, config, window: int) -> None:
        from flax import nnx

        from jaxgpt import model as jax_model
        from jaxgpt.run import convert

        self.model = jax_model.GPT(config, rngs=nnx.Rngs(0))
        convert.load_params(self.model, convert.torch_state_dict_to_params(state_dict, config))
        # The window is a Python int closed over: one compile per shape, as in the record.
        self._logits = nnx.jit(lambda model, inputs: model.logits(inputs, window, train=False)[0])
        self._loss = nnx.jit(lambda model, inputs, targets: model(inputs, targets, window, train=False))

    def logits_and_loss(self, inputs: np.ndarray, targets: np.ndarray) -> tuple[np.ndarray, float]:
        """(T,) int32 inputs and targets -> ((T, Vp) fp32 logits before the soft-cap, loss)."""
        import jax.numpy as jnp

        logits = self._logits(self.model, jnp.asarray(inputs)[None])
        return np.asarray(logits, np.float32), self.loss(inputs[None], targets[None])

    def loss(self, inputs, targets) -> float:
        """Mean loss of (1, T) int32 inputs and targets."""
        import jax.numpy as jnp

        return float(self._loss(self.model, jnp.asarray(inputs), jnp.asarray(targets)))


def torch_val_loss(model: TorchModel, shard: Path, val_tokens: int, seq_len: int) -> float:
    """The record's evaluation on one rank: torch_ref's generator, mean of the sequence losses."""
    from tqdm import tqdm

    from torch_ref.data import val_batches

    losses = [model.loss(inputs, targets)
              for inputs, targets in tqdm(val_batches(str(shard), val_tokens, seq_len, 0, 1), total=val_tokens // seq_len,
                                          desc="torch_ref val", file=sys.stderr, disable=None)]
    return float(np.mean(losses))


def jax_val_loss(model: JaxModel, shard: Path, val_tokens: int, seq_len: int) -> float:
    """The same evaluation through jaxgpt's loader (one sequence per batch)."""
    from tqdm import tqdm

    from jaxgpt.data import val_batches

    losses = [model.loss(batch.inputs, batch.targets)
              for batch in tqdm(val_batches(str(shard), val_tokens, seq_len, seq_len), total=val_tokens // seq_len,
                                desc="jaxgpt val", file=sys.stderr, disable=None)]
    return float(np.mean(losses))


def model_window(attention_mask: str, window_blocks: int | None, window_tokens: int | None) -> tuple[int, int]:
    """(the window the model's forward takes, the blocks it spans) for a preset's attention mask,
    from the flags that record's forward would take; ValueError naming the right flag otherwise."""
    flags = {"document_blocks": ("--window-blocks", window_blocks), "document_tokens": ("--window-tokens", window_tokens),
             "causal": (None, None)}
    wanted, value = flags[attention_mask]
    given = [flag for flag, v in (("--window-blocks", window_blocks), ("--window-tokens", window_tokens))
             if v is not None and flag != wanted]
    if given:
        takes = f"takes {wanted}" if wanted else "takes no window (dense causal attention within each sequence)"
        raise ValueError(f"{given[0]} does not apply: this preset's forward {takes}")
    if wanted is None:
        return 0, 1
    if value is None:
        raise ValueError(f"this preset's forward takes a window: pass {wanted}")
    if value < 0:
        raise ValueError(f"{wanted} must be >= 0, got {value}")
    return value, max(1, -(-value // BLOCK_SIZE) if wanted == "--window-tokens" else value)


def agreement(jax_logits: np.ndarray, torch_logits: np.ndarray, jax_loss: float, torch_loss: float) -> dict:
    """How far two (T, V) logits and their losses are apart: absolute, relative to the largest
    logit, and in their argmax (the JSON's agreement fields)."""
    diff = np.abs(jax_logits - torch_logits)
    scale = float(np.abs(torch_logits).max())
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
    }


def compare(checkpoint: Path, tokens_path: Path, *, window_blocks: int | None = None, seq_len: int | None = None,
            head_dim: int | None = None, eot_id: int | None = None, attention_backend: str = "blocked",
            dtype: str = "fp32", val_tokens: int | None = None, dump_logits: Path | None = None,
            preset: str | None = None, window_tokens: int | None = None) -> dict:
    """Both models on the first T + 1 tokens of the shard (and, with `val_tokens`, the record's
    validation loss in both); the JSON object `scripts/compare_checkpoint.py --json` prints.
    `preset`: the lineage record the checkpoint comes from (the module docstring); None: the
    record's model with the dims of the checkpoint.
    Raises ValueError (bad input) or FileNotFoundError naming the problem, before any model runs."""
    from jaxgpt import presets
    from jaxgpt.data import read_shard
    from jaxgpt.run import convert

    base = presets.get_preset(preset or "record")
    window, window_cap = model_window(base.model.lineage.attention_mask, window_blocks, window_tokens)
    tokens = read_shard(tokens_path)
    requested = seq_len
    if requested is None and base.model.lineage.attention_mask == "causal":
        requested = min(base.train.seq_len, (len(tokens) - 1) // BLOCK_SIZE * BLOCK_SIZE) or None  # the record's rows
    if val_tokens is not None and requested is None:
        requested = min(val_tokens, RECORD_VAL_SEQ_LEN)
    seq_len = choose_seq_len(len(tokens), requested)
    if val_tokens is not None:
        check_val_tokens(val_tokens, seq_len, len(tokens))
    chunk = np.asarray(tokens[: seq_len + 1], dtype=np.int32)
    inputs, targets = chunk[:-1], chunk[1:]

    payload = convert.read_record_payload(checkpoint, flag="CHECKPOINT")
    try:
        state_dict = convert.to_model_names(payload["model"])
        head_dim, head_dim_source = choose_head_dim(state_dict, payload, head_dim)
    except ValueError as error:
        raise ValueError(f"CHECKPOINT: {checkpoint}: {error}") from None
    eot = {} if eot_id is None else {"eot_id": eot_id}
    # --dtype bf16: the preset's own bf16 eval policy (the record's when no preset is named).
    policy = "fp32" if dtype == "fp32" else base.model.dtype_policy
    state_dict, config = convert.read_model(
        checkpoint, base.model, flag="CHECKPOINT", head_dim=head_dim, state_dict=state_dict, **eot,
        dtype_policy=policy, loss_chunk_tokens=None, attention_backend=attention_backend, max_window_blocks=window_cap,
    )
    start = time.perf_counter()
    torch_gpt = TorchModel(state_dict, config, window)
    torch_logits, torch_loss = torch_gpt.logits_and_loss(inputs, targets)
    torch_seconds = time.perf_counter() - start
    start = time.perf_counter()
    jax_gpt = JaxModel(state_dict, config, window)
    jax_logits, jax_loss = jax_gpt.logits_and_loss(inputs, targets)
    jax_seconds = time.perf_counter() - start

    if dump_logits is not None:
        np.savez(dump_logits, torch=torch_logits, jax=jax_logits)
    result = {
        **agreement(jax_logits, torch_logits, jax_loss, torch_loss),
        "seq_len": seq_len,
        "window_blocks": window_blocks,
        "window_tokens": window_tokens,
        "preset": preset or "record",
        "dtype_policy": config.dtype_policy,
        "dtype": dtype,
        "head_dim_from": head_dim_source,
        "model": {"vocab_size": config.vocab_size, "padded_vocab_size": config.padded_vocab_size,
                  "num_layers": config.num_layers, "num_heads": config.num_heads,
                  "model_dim": config.model_dim, "attention_free_layers": list(config.attention_free_layers)},
        "jax_attention_backend": attention_backend,
        "torch_seconds": round(torch_seconds, 3),
        "jax_seconds": round(jax_seconds, 3),
    }
    if val_tokens is not None:
        torch_val = torch_val_loss(torch_gpt, tokens_path, val_tokens, seq_len)
        jax_val = jax_val_loss(jax_gpt, tokens_path, val_tokens, seq_len)
        result.update(val_tokens=val_tokens, torch_val_loss=torch_val, jax_val_loss=jax_val,
                      val_loss_abs_diff=abs(jax_val - torch_val))
    return result
