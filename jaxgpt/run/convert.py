"""Record-format (PyTorch) state dicts <-> jaxgpt parameters.

jaxgpt's parameter names and layouts are the record's (see jaxgpt.model), so conversion is
stripping `torch.compile`'s `_orig_mod.` prefix, moving tensors to numpy (bf16 stays bf16,
bit for bit, through ml_dtypes) and checking every key and shape. The earlier records'
checkpoints (#8-#18, LINEAGE.md) use their own names, which `to_model_names` maps.

torch is imported only inside the functions that need it, so jaxgpt imports without torch.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
from flax import nnx

from jaxgpt import model as model_lib
from jaxgpt import params as params_lib
from jaxgpt.config import ModelConfig, Preset, replace, with_fields
from runkit.convert import state_dict_problem, zip_damage

COMPILE_PREFIX = "_orig_mod."

_BLOCK_KEY = re.compile(r"^blocks\.(\d+)\.")


def _is_torch_tensor(value: Any) -> bool:
    return type(value).__module__.startswith("torch")


def _to_numpy(value: Any) -> np.ndarray:
    """A torch tensor or array-like as numpy, keeping fp32 as fp32 and bf16 as ml_dtypes bf16."""
    if _is_torch_tensor(value):
        import torch  # lazy: only callers that pass torch tensors need torch

        tensor = value.detach().cpu()
        if tensor.dtype == torch.bfloat16:
            return tensor.contiguous().view(torch.int16).numpy().view(ml_dtypes.bfloat16)
        return tensor.contiguous().numpy()
    return np.asarray(value)


def strip_compile_prefix(state_dict: Mapping[str, Any]) -> dict[str, Any]:
    """Drop `_orig_mod.` (torch.compile's wrapper) from every key that has it. Raises ValueError
    when two keys become one (a key both with and without the prefix)."""
    stripped = {}
    for key, value in state_dict.items():
        while key.startswith(COMPILE_PREFIX):
            key = key[len(COMPILE_PREFIX):]
        if key in stripped:
            raise ValueError(f"state dict has the key {key!r} both with and without the `_orig_mod.` prefix")
        stripped[key] = value
    return stripped


# The earlier records' own state-dict names (LINEAGE.md 3.1, 5.1, 6.1) -> this project's:
# #8/#9/#15 nest the model in `transformer` (`wte`, `vte`, `h.{i}`), #8-#18 name the attention's
# input projections c_q, c_k, c_v (our qkv_layout "separate"), #15 keeps its rotary frequencies
# as a persistent buffer (recomputed here, so dropped).
_RECORD_RENAMES = (
    (re.compile(r"^transformer\.wte\."), "embed."),
    (re.compile(r"^transformer\.vte\."), "value_embeds.embed.0."),
    (re.compile(r"^transformer\.h\."), "blocks."),
    (re.compile(r"\.attn\.c_q\.weight$"), ".attn.q_w"),
    (re.compile(r"\.attn\.c_k\.weight$"), ".attn.k_w"),
    (re.compile(r"\.attn\.c_v\.weight$"), ".attn.v_w"),
)
_RECORD_BUFFERS = re.compile(r"\.attn\.rotary\.inv_freq$")


def to_model_names(state_dict: Mapping[str, Any]) -> dict[str, Any]:
    """A state dict saved by any record of the lineage (#8 UntieEmbed ... #20 Sub3Min, with or
    without `_orig_mod.`) under this project's parameter names; Sub3Min's keys pass unchanged."""
    renamed = {}
    for key, value in strip_compile_prefix(state_dict).items():
        if _RECORD_BUFFERS.search(key):
            continue
        for pattern, replacement in _RECORD_RENAMES:
            key = pattern.sub(replacement, key)
        if key in renamed:
            raise ValueError(f"state dict has two keys for {key!r} (a record's name and this project's)")
        renamed[key] = value
    return renamed


_QKV_KEY = re.compile(r"^(blocks\.\d+\.attn\.)(qkv_w|q_w|k_w|v_w)$")


def qkv_layout_of(state_dict: Mapping[str, Any]) -> str | None:
    """"merged" when the attention weights are `attn.qkv_w`, "separate" for `attn.q_w`/`k_w`/`v_w`,
    None without attention weights. Raises ValueError when a state dict mixes the two."""
    found = {"merged" if m.group(2) == "qkv_w" else "separate"
             for key in state_dict if (m := _QKV_KEY.match(key))}
    if len(found) > 1:
        raise ValueError("state dict mixes merged (`attn.qkv_w`) and separate (`attn.q_w`...) QKV weights")
    return found.pop() if found else None


def to_qkv_layout(params: Mapping[str, Any], layout: str) -> dict[str, Any]:
    """`params` ({record name: array or torch tensor}) with every attention's QKV weights in
    `layout`: "merged" stacks q_w, k_w, v_w (D, D) into qkv_w (3, D, D); "separate" splits
    qkv_w into its three slices. Values are moved, not changed; other keys pass through.
    Raises ValueError on an unknown layout or a block missing some of q_w, k_w, v_w."""
    if layout not in ("merged", "separate"):
        raise ValueError(f"qkv_layout must be 'merged' or 'separate', got {layout!r}")
    out: dict[str, Any] = {}
    separate: dict[str, dict[str, Any]] = {}
    for key, value in params.items():
        m = _QKV_KEY.match(key)
        if m is None:
            out[key] = value
        elif m.group(2) == "qkv_w":
            if layout == "merged":
                out[key] = value
            else:
                out.update({m.group(1) + name: value[i] for i, name in enumerate(model_lib.SEPARATE_QKV_NAMES)})
        elif layout == "separate":
            out[key] = value
        else:
            separate.setdefault(m.group(1), {})[m.group(2)] = value
    for prefix, parts in separate.items():
        missing = [name for name in model_lib.SEPARATE_QKV_NAMES if name not in parts]
        if missing:
            raise ValueError(f"{prefix[:-1]} has separate QKV weights but lacks {missing}")
        slices = [parts[name] for name in model_lib.SEPARATE_QKV_NAMES]
        out[prefix + "qkv_w"] = _stack(slices)
    return out


def _stack(slices: list[Any]) -> Any:
    if _is_torch_tensor(slices[0]):
        import torch  # lazy: see module docstring

        return torch.stack(slices)
    return np.stack([np.asarray(s) for s in slices]) if isinstance(slices[0], np.ndarray) else jnp.stack(slices)


def model_config_from_state_dict(
    state_dict: Mapping[str, Any], base: ModelConfig | None = None, *, head_dim: int | None = None, **overrides: Any
) -> ModelConfig:
    """The ModelConfig of the model whose weights `state_dict` holds (record keys, `_orig_mod.`
    allowed): the one rule for reading a model's dims off a checkpoint.

    Starts from `base` (default: the record's ModelConfig) with `overrides` applied. When that
    config fits and `head_dim` is None or its own, it is returned as is (all fields kept).
    Otherwise D and V come from `embed.weight` (V, D), the depth from the `blocks.{i}` indices,
    heads = D // head_dim (shapes do not say how D splits into heads: `head_dim`, else the base's,
    128 for the record and 64 for tiny), and layers without `attn.qkv_w` (or `attn.q_w`...) are
    attention-free; qkv_layout is the state dict's (`qkv_layout_of`) whenever it has one; every
    other field (the per-layer patterns included) is the base's, so the depth must be the base's.
    Raises ValueError naming what does not fit; `torch_state_dict_to_params` checks every key.
    """
    keys = to_model_names(state_dict)
    base = with_fields(base or ModelConfig(), **overrides)
    base = replace(base, qkv_layout=qkv_layout_of(keys) or base.qkv_layout)
    if head_dim in (None, base.head_dim) and not params_lib.param_shape_problems(keys, _shapes(base)):
        return base
    head_dim = head_dim or base.head_dim
    if "embed.weight" not in keys:
        raise ValueError("state dict has no `embed.weight`; cannot infer the model dims")
    rows, model_dim = (int(n) for n in np.shape(_shape_source(keys["embed.weight"])))
    # #8-#18 pad their tables as their head: the base's vocabulary when its padded rows fit.
    vocab_size = base.vocab_size if rows == base.embedding_rows else rows
    if model_dim % head_dim:
        raise ValueError(f"model_dim {model_dim} (from embed.weight) is not divisible by head_dim {head_dim}")
    layers = sorted({int(m.group(1)) for key in keys if (m := _BLOCK_KEY.match(key))})
    if not layers or layers != list(range(len(layers))):
        raise ValueError(f"block indices must be 0..L-1, found {layers}")
    if len(layers) != base.num_layers:
        raise ValueError(
            f"found {len(layers)} blocks, but the config's per-layer patterns are for {base.num_layers} layers; "
            "choose a preset (or pass a ModelConfig) of that depth"
        )
    if vocab_size <= base.eot_id:
        raise ValueError(
            f"embed.weight has {vocab_size} rows, too few for the GPT-2 EOT id {base.eot_id}; pass eot_id=..."
        )
    attention_free = tuple(i for i in layers if not any(key.startswith(f"blocks.{i}.attn.") and _QKV_KEY.match(key) for key in keys))
    return replace(base, vocab_size=vocab_size, model_dim=model_dim, num_heads=model_dim // head_dim,
                   attention_free_layers=attention_free)


def _shape_source(value: Any) -> Any:
    return value if hasattr(value, "shape") else np.asarray(value)


@functools.lru_cache(maxsize=16)  # an abstract model per call: a checkpoint's dims are checked several times
def _shapes(config: ModelConfig) -> dict[str, tuple[int, ...]]:
    return {name: tuple(s.shape) for name, s in params_lib.param_shapes(config).items()}


def _check_against(params: Mapping[str, Any], config: ModelConfig) -> None:
    params_lib.check_param_shapes(
        params, _shapes(config),
        f"the model (vocab {config.vocab_size}, padded {config.padded_vocab_size}, dim {config.model_dim}, "
        f"layers {config.num_layers})",
    )


def torch_state_dict_to_params(
    state_dict: Mapping[str, Any], config: ModelConfig | None = None, *, head_dim: int | None = None,
    **config_overrides: Any,
) -> dict[str, np.ndarray]:
    """Record state dict (torch tensors or arrays, fp32 or bf16) -> {record name: numpy array}.

    Keys may carry `_orig_mod.`. Dtypes are kept (bf16 as ml_dtypes.bfloat16); the model casts
    on load. With config=None the dims are inferred (`model_config_from_state_dict`). Raises
    ValueError listing every missing, unknown and mis-shaped key. QKV weights are converted to
    config.qkv_layout (`to_qkv_layout`: a merged record checkpoint loads into a separate model
    and back). `config_overrides` go to
    `model_config_from_state_dict` when the config is inferred.
    """
    keys = to_model_names(state_dict)
    if config is None:
        config = model_config_from_state_dict(keys, head_dim=head_dim, **config_overrides)
    keys = to_qkv_layout(keys, config.qkv_layout)
    _check_against(keys, config)
    return {name: _to_numpy(value) for name, value in keys.items()}


def load_checkpoint_state(path: str | Path, *, flag: str = "checkpoint") -> dict[str, Any]:
    """The state dict of a record-format torch checkpoint {"model": state_dict}, `_orig_mod.`
    prefixes stripped and any lineage record's names mapped (`to_model_names`), tensors on the
    CPU. `flag` names the file's source in errors."""
    return to_model_names(read_record_payload(path, flag=flag)["model"])


def read_record_payload(path: str | Path, *, flag: str = "checkpoint") -> dict[str, Any]:
    """The whole record-format checkpoint {"model": state_dict, ...} (tensors on the CPU); a
    missing, foreign or malformed file is one error line naming it and what was expected."""
    import torch  # lazy: see module docstring

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{flag} checkpoint not found: {path}")
    damage = zip_damage(path)
    if damage is not None:
        raise ValueError(f"{flag}: {path} is damaged ({damage}); expected a torch.save file holding "
                         "{'model': state_dict}")
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # noqa: BLE001 - unpickling fails in many ways on a foreign file
        first_line = (str(error).strip().splitlines() or [""])[0][:200]
        raise ValueError(f"{flag}: {path} is not a readable torch checkpoint ({type(error).__name__}: {first_line}); "
                         "expected a torch.save file holding {'model': state_dict}") from None
    if not isinstance(checkpoint, dict) or "model" not in checkpoint:
        raise ValueError(f"{flag}: {path} is not a record-format checkpoint (a dict with a 'model' state dict)")
    problem = state_dict_problem(checkpoint["model"], _is_torch_tensor)
    if problem is not None:
        raise ValueError(f"{flag}: {path} is not a record-format checkpoint: its 'model' state dict {problem}")
    return checkpoint


def check_state_dict(state_dict: Mapping[str, Any], config: ModelConfig) -> None:
    """ValueError listing every missing, unknown and mis-shaped key of `state_dict` (any record's
    names, either QKV layout) for a model of `config`; shapes only, nothing copied."""
    _check_against(to_qkv_layout(to_model_names(state_dict), config.qkv_layout), config)


def read_model(path: str | Path, base: ModelConfig, *, flag: str, head_dim: int | None = None,
               state_dict: Mapping[str, Any] | None = None, **overrides: Any) -> tuple[dict[str, Any], ModelConfig]:
    """(state dict, its model config) of the record checkpoint at `path`: read (unless
    `state_dict` is given), the dims inferred from `base` (`model_config_from_state_dict`), every
    key and shape checked before anything is built from them. One ValueError line naming `flag`
    and the file when any of it fails."""
    if state_dict is None:
        state_dict = load_checkpoint_state(path, flag=flag)
    try:
        config = model_config_from_state_dict(state_dict, base, head_dim=head_dim, **overrides)
        check_state_dict(state_dict, config)
    except ValueError as error:
        raise ValueError(f"{flag}: {path}: {error}") from None
    return dict(state_dict), config


def init_preset(preset: Preset, path: str | Path | None, head_dim: int | None = None,
                state_dict: Mapping[str, Any] | None = None) -> tuple[Preset, dict[str, Any] | None]:
    """(`preset` with the model dims of the record checkpoint at `path`, its state dict): what
    --init-from trains; `state_dict` is that file when already read (it is then not read
    again). (preset, None) when `path` is None. ValueError naming the file (`read_model`)."""
    if path is None:
        return preset, None
    state_dict, model = read_model(path, preset.model, flag="--init-from", head_dim=head_dim, state_dict=state_dict)
    return replace(preset, model=model), state_dict


def params_to_torch_state_dict(params: Mapping[str, Any]) -> dict[str, Any]:
    """{record name: array} -> {record name: torch tensor}, same dtypes (bf16 bit-exact)."""
    import torch  # lazy: see module docstring

    state_dict = {}
    for name, value in params.items():
        array = np.asarray(value)
        if array.dtype == ml_dtypes.bfloat16:
            tensor = torch.from_numpy(np.ascontiguousarray(array).view(np.int16).copy()).view(torch.bfloat16)
        elif array.dtype in (np.float32, np.float64, np.float16, np.int32, np.int64):
            tensor = torch.from_numpy(np.array(array, copy=True))
        else:
            raise ValueError(f"parameter {name!r} has dtype {array.dtype} with no torch equivalent here")
        state_dict[name] = tensor
    return state_dict


def load_params(model: model_lib.GPT, params: Mapping[str, Any]) -> None:
    """Write `params` (record names, any float dtype) into an NNX GPT, cast to its dtypes.

    QKV weights in either layout are converted to the model's (`to_qkv_layout`). Raises
    ValueError listing every missing, unknown and mis-shaped name.
    """
    params = to_qkv_layout(params, model.config.qkv_layout)
    params_lib.load_param_dict(model, {name: _to_numpy(value) for name, value in params.items()})


def model_from_params(params: Mapping[str, Any], config: ModelConfig) -> model_lib.GPT:
    """A jaxgpt GPT(config) holding `params` ({record name: array}; no random init is run).
    Raises ValueError listing every missing, unknown and mis-shaped name."""
    model = _materialize(nnx.eval_shape(lambda: model_lib.GPT(config, rngs=nnx.Rngs(0))))
    load_params(model, params)
    return model


def _materialize(abstract_model: model_lib.GPT) -> model_lib.GPT:
    """Zeros in place of an nnx.eval_shape model's abstract leaves (nothing is sampled)."""
    graphdef, state = nnx.split(abstract_model)
    return nnx.merge(graphdef, jax.tree.map(lambda leaf: jnp.zeros(leaf.shape, leaf.dtype), state))
