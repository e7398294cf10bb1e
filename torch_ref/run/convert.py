"""The records' `.pt` files in torch_ref: reading one safely, their names, QKV layout and dims
(mirrors jaxgpt.run.convert, which also converts to and from jaxgpt's params).

`read_checkpoint` reads any torch_ref or record-format file (the zip's CRC-32 checked first, then
the 'model' state dict's kinds); torch_ref's own step files go through it too. A record saves its
compiled model (`_orig_mod.` key prefixes) under its own names (#8/#9/#15's
`transformer.{wte,vte,h.i}`, #8-#18's c_q/c_k/c_v); `to_model_names` maps any of them to
torch_ref's, `load_record_state_dict` loads the result into a GPT of either QKV layout,
`model_config_from_state_dict` reads the model's dims off it and `check_record_shapes` checks
every key and shape on the meta device before anything is allocated. The file's zip container
and its state dict are checked as jaxgpt's are (runkit.convert).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from runkit.convert import state_dict_problem, zip_damage
from torch_ref.config import ModelConfig
from torch_ref.config import replace as replace_config
from torch_ref.model import GPT, QKV_LAYOUTS, SEPARATE_QKV_NAMES, CausalSelfAttention


def read_checkpoint(path: str | os.PathLike, what: str = "checkpoint") -> dict[str, Any]:
    """A torch_ref / record-format checkpoint dict, read on the CPU; ValueError in one line
    naming the file and what was expected when it is not one (FileNotFoundError when absent)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{what} not found: {path}")
    if (damage := zip_damage(path)) is not None:
        raise ValueError(f"{what} {path} is damaged ({damage}); expected a torch file holding {{'model': state_dict, ...}}")
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # noqa: BLE001 - unpickling raises many unrelated types
        first_line = (str(error).strip().splitlines() or [""])[0][:200]
        raise ValueError(f"{what} {path} is not a readable torch checkpoint ({type(error).__name__}: {first_line}); "
                         "expected a torch file holding {'model': state_dict, ...}") from None
    if not isinstance(checkpoint, dict) or "model" not in checkpoint:
        raise ValueError(f"{what} {path} is not a record-format checkpoint (a dict with a 'model' state dict)")
    if (problem := state_dict_problem(checkpoint["model"], lambda value: isinstance(value, Tensor))) is not None:
        raise ValueError(f"{what} {path} is not a record-format checkpoint: its 'model' state dict {problem}")
    return checkpoint


def load_checkpoint_state(path: str | Path) -> dict[str, Tensor]:
    """The model state dict of a record-format checkpoint, prefixes stripped, on the CPU."""
    return to_model_names(read_checkpoint(path, "--init-from checkpoint")["model"])


_COMPILE_PREFIX = "_orig_mod."


def strip_compile_prefix(state_dict: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """Drop torch.compile's `_orig_mod.` key prefixes (the record saves its compiled model)."""
    out = {}
    for key, value in state_dict.items():
        while key.startswith(_COMPILE_PREFIX):
            key = key[len(_COMPILE_PREFIX):]
        out[key] = value
    return out


# The earlier records' own names (LINEAGE.md 3.1, 5.1, 6.1) -> torch_ref's: #8/#9/#15's
# `transformer.{wte,vte,h.i}`, #8-#18's c_q/c_k/c_v (qkv_layout "separate"); #15's persistent
# rotary buffer is recomputed from its config, so dropped.
_RECORD_RENAMES = (
    (r"^transformer\.wte\.", "embed."),
    (r"^transformer\.vte\.", "value_embeds.embed.0."),
    (r"^transformer\.h\.", "blocks."),
    (r"\.attn\.c_q\.weight$", ".attn.q_w"),
    (r"\.attn\.c_k\.weight$", ".attn.k_w"),
    (r"\.attn\.c_v\.weight$", ".attn.v_w"),
)


def to_model_names(state_dict: Mapping[str, Tensor]) -> dict[str, Tensor]:
    """A state dict saved by any record of the lineage (`_orig_mod.` or not) under torch_ref's
    parameter names; Sub3Min's keys pass unchanged."""
    renamed: dict[str, Tensor] = {}
    for key, value in strip_compile_prefix(state_dict).items():
        if re.search(r"\.attn\.rotary\.inv_freq$", key):
            continue
        for pattern, replacement in _RECORD_RENAMES:
            key = re.sub(pattern, replacement, key)
        if key in renamed:
            raise ValueError(f"state dict has two keys for {key!r} (a record's name and torch_ref's)")
        renamed[key] = value
    return renamed


def to_qkv_layout(state_dict: Mapping[str, Tensor], layout: str) -> dict[str, Tensor]:
    """`state_dict` with every block's attention weights in `layout`: "merged" stacks
    `attn.q_w`, `attn.k_w`, `attn.v_w` (D, D) into `attn.qkv_w` (3, D, D), "separate" splits it.
    Values are moved, not changed; other keys pass through. Raises ValueError on an unknown
    layout or a block with only some of q_w, k_w, v_w."""
    if layout not in QKV_LAYOUTS:
        raise ValueError(f"qkv_layout must be 'merged' or 'separate', got {layout!r}")
    out: dict[str, Tensor] = {}
    for key, value in state_dict.items():
        prefix, _, name = key.rpartition(".")
        if name == "qkv_w" and layout == "separate":
            out.update({f"{prefix}.{part}": w for part, w in zip(SEPARATE_QKV_NAMES, value.unbind(0), strict=True)})
        elif name in SEPARATE_QKV_NAMES and layout == "merged":
            parts = [f"{prefix}.{part}" for part in SEPARATE_QKV_NAMES]
            if not all(part in state_dict for part in parts):
                raise ValueError(f"{prefix} has separate QKV weights but not all of {list(SEPARATE_QKV_NAMES)}")
            if name == SEPARATE_QKV_NAMES[0]:
                out[f"{prefix}.qkv_w"] = torch.stack([state_dict[part] for part in parts])
        else:
            out[key] = value
    return out


def qkv_layout_of(model: nn.Module) -> str:
    """The qkv_layout of `model`'s attention layers ("merged" when it has none)."""
    layouts = {m.qkv_layout for m in model.modules() if isinstance(m, CausalSelfAttention)}
    return layouts.pop() if len(layouts) == 1 else "merged"


def load_record_state_dict(model: nn.Module, state_dict: Mapping[str, Tensor], *, shapes_only: bool = False) -> nn.Module:
    """Load a record-format state dict into `model`, in place (`shapes_only`: check, load nothing).

    Strips torch.compile's `_orig_mod.` prefixes, converts the QKV weights to the model's
    qkv_layout (`to_qkv_layout`) and casts each tensor to the dtype and device of the model's
    own tensor (bf16 <-> fp32). Raises ValueError listing missing, unexpected and mis-shaped keys.
    """
    own = model.state_dict()
    renamed = to_qkv_layout(to_model_names(state_dict), qkv_layout_of(model))
    missing = sorted(set(own) - set(renamed))
    unexpected = sorted(set(renamed) - set(own))
    misshaped = sorted(
        f"{k}: checkpoint {tuple(renamed[k].shape)} vs model {tuple(own[k].shape)}"
        for k in set(own) & set(renamed)
        if tuple(renamed[k].shape) != tuple(own[k].shape)
    )
    if missing or unexpected or misshaped:
        problems = []
        if missing:
            problems.append(f"missing keys: {missing}")
        if unexpected:
            problems.append(f"unexpected keys: {unexpected}")
        if misshaped:
            problems.append(f"mis-shaped keys: {misshaped}")
        raise ValueError("state dict does not match the model; " + "; ".join(problems))
    if shapes_only:
        return model
    converted = {k: v.detach().to(dtype=own[k].dtype, device=own[k].device) for k, v in renamed.items()}
    model.load_state_dict(converted, strict=True)
    return model


def model_config_from_state_dict(base: ModelConfig, state_dict: dict[str, Tensor], head_dim: int) -> ModelConfig:
    """`base` with vocab, width, depth, heads and attention-free layers read off a record state dict.

    D = embed.weight.shape[1], vocab = its rows, layers = the number of `blocks.i`, heads =
    D // head_dim; a block without `attn.qkv_w` (or `attn.q_w`...) is attention-free (layer 7 in
    the record); qkv_layout is the state dict's.
    """
    state_dict = to_model_names(state_dict)
    if "embed.weight" not in state_dict:
        raise ValueError("checkpoint state dict has no 'embed.weight'; not a record-format model")
    if state_dict["embed.weight"].dim() != 2:
        raise ValueError(f"embed.weight has shape {tuple(state_dict['embed.weight'].shape)}; expected (vocabulary, width)")
    rows, model_dim = state_dict["embed.weight"].shape
    # #8-#18 pad their embeddings as their head: the base's vocabulary when its padded rows fit.
    padded_rows = base.embedding_rows
    vocab_size = base.vocab_size if rows == padded_rows else rows
    block_names = {key.split(".")[1] for key in state_dict if key.startswith("blocks.")}
    if not all(name.isdigit() and name.isascii() for name in block_names):
        raise ValueError(f"checkpoint block names are not numbers: {sorted(block_names)[:5]}")
    layers = sorted({int(name) for name in block_names})
    if not layers or layers != list(range(len(layers))):
        raise ValueError(f"checkpoint blocks are not numbered 0..n-1: {layers}")
    if model_dim % head_dim:
        raise ValueError(f"model_dim {model_dim} from the checkpoint is not divisible by --head-dim {head_dim}")
    has_attention = {i for i in layers for name in ("qkv_w", "q_w") if f"blocks.{i}.attn.{name}" in state_dict}
    attention_free = tuple(i for i in layers if i not in has_attention)
    separate = any(f"blocks.{i}.attn.q_w" in state_dict for i in layers)
    return replace_config(
        base,
        qkv_layout="separate" if separate else "merged" if has_attention else base.qkv_layout,
        vocab_size=int(vocab_size),
        model_dim=int(model_dim),
        num_layers=len(layers),
        num_heads=int(model_dim) // head_dim,
        attention_free_layers=attention_free,
    )


def check_record_shapes(config: ModelConfig, state_dict: Mapping[str, Tensor]) -> None:
    """ValueError listing the missing, unexpected and mis-shaped keys of `state_dict` for
    GPT.from_config(config), found on the meta device: nothing is allocated before a state dict
    is known to fit (its dims could otherwise ask for any size)."""
    with torch.device("meta"):
        load_record_state_dict(GPT.from_config(config), state_dict, shapes_only=True)
