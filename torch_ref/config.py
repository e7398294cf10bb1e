"""torch_ref's own configuration: the record's hyperparameters (RECORD.md sections 1, 2, 5-8).

The record keeps its run settings in one `Hyperparameters` dataclass and its model sizes in the
`GPT(...)` call; torch_ref groups the same numbers as model / optimizer / run configs so that a
reader can hold them beside jaxgpt's. Nothing here is imported from jaxgpt: torch_ref stands
alone, and parity_tests/test_config_parity.py checks that both packages state the same values.

The lineage (docs/spec/LINEAGE.md: #8 UntieEmbed, #9 ShortcutsTweaks, #15 UNetValueEmbedsTweaks,
#18 SoftCap) is a set of switches of the same configs, held apart in one object per section
(`ModelConfig.lineage`, `OptimConfig.lineage`, `TrainConfig.lineage`, as in jaxgpt.config);
their defaults are Sub3Min's, and each lineage preset is a set of their values (the named presets
and their registry: torch_ref.presets).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

BLOCK_SIZE = 128  # FlexAttention's block: masks, windows and sequence lengths count in these
EOT_ID = 50256  # GPT-2 <|endoftext|>, prepended to every document (RECORD.md 8.4)
VOCAB_SIZE = 50257  # GPT-2's vocabulary; the head pads it to a multiple of 128 (50304)
RECORD_DEVICE_TOKENS = 65536  # tokens of one rank's loss mean in the record (8 ranks x 64 Ki)
RECORD_FP8_GRAD_SCALE = 2.0**29  # the FP8 head's gradient scale, sized for that mean


def fp8_grad_scale_for(tokens_per_mean: int, record_scale: float = RECORD_FP8_GRAD_SCALE) -> float:
    """The FP8 head's gradient scale for a loss averaged over `tokens_per_mean` tokens: k times
    the tokens give k times smaller gradients, so the scale grows by k and the e5m2-quantised
    gradients stay the record's."""
    return record_scale * tokens_per_mean / RECORD_DEVICE_TOKENS


replace = dataclasses.replace  # validated copies: __post_init__ runs on the copy


def next_multiple(value: int, multiple: int) -> int:
    """Smallest multiple of `multiple` that is >= `value`."""
    return -(-value // multiple) * multiple


def _check(ok: bool, name: str, message: str) -> None:
    if not ok:
        raise ValueError(f"invalid config field `{name}`: {message}")


def _choice(value: str, choices: tuple[str, ...], name: str) -> None:
    _check(value in choices, name, f"must be one of {', '.join(map(repr, choices))}, got {value!r}")


# The lineage switches' choices; the first of each is Sub3Min's (LINEAGE.md section 7).
DTYPE_POLICIES = ("record", "fp32", "bf16_model", "autocast")
EMBED_ROWS = ("vocab", "padded")
LINEAR_INITS = ("record", "torch_default")
VALUE_EMBED_LAYOUTS = ("tables", "chunks")
ATTENTION_MASKS = ("document_blocks", "document_tokens", "causal")
ROTARY_KINDS = ("half_truncated", "full", "full_bf16_freq", "full_bf16_freq_eager")
SOFT_CAPS = ("sigmoid", "tanh", "none")
SOFT_CAP_ROUNDINGS = ("once", "per_op")
RMS_NORM_EPS = ("fp32", "as_run")
MUON_MOMENTUM_FORMS = ("ema", "sgd")
NS_ITERATIONS = ("poly", "chain")
WINDOW_SCHEDULES = ("blocks_ceil", "blocks_floor", "tokens", "none")
SHARD_SWITCHES = ("global", "per_rank", "per_rank_inclusive")


@dataclass(frozen=True)
class ModelLineage:
    """The lineage's model switches (meanings as in jaxgpt.config.ModelLineage); every default is
    Sub3Min's, so the record's model never sets one."""

    embed_rows: str = "vocab"  # "padded": embedding tables of the head's 50304 rows (#8-#18)
    linear_init: str = "record"  # "torch_default": nn.Linear's U(+-1/sqrt(fan_in)) (#8-#18)
    block_lambdas: bool = True  # x <- l0 x + l1 x0 (#9 on)
    unet_skips: bool = True  # skip_weights (#11 on)
    value_embed_layout: str = "tables"  # "chunks": one (V, k D) table split in D-wide chunks (#15)
    attn_value_lambdas: bool = True  # attn.lambdas (2,) (#15 on)
    value_residual: bool = False  # #9's attn.lamb: v = (1 - lamb) v + lamb v_0
    attention_mask: str = "document_blocks"  # "document_tokens" (#15), "causal" (#8/#9)
    rotary: str = "half_truncated"  # "full" (#8/#9), "full_bf16_freq" (#15), "full_bf16_freq_eager"
    as_written_roundings: bool = True  # the records' own bf16 roundings (the "full*" rotary tables) in every policy
    soft_cap: str = "sigmoid"  # "tanh" (#9-#18), "none" (#8)
    soft_cap_rounding: str = "once"  # tanh on bf16 logits: one rounding (compiled) or "per_op" (eager)
    fp8_head: bool = True  # FP8 lm_head in training (#19 on)
    rms_norm_eps: str = "fp32"  # "as_run": 2^-7 on bf16 inputs (the records' PyTorch builds)

    def __post_init__(self) -> None:
        for name, choices in (("embed_rows", EMBED_ROWS), ("linear_init", LINEAR_INITS),
                              ("value_embed_layout", VALUE_EMBED_LAYOUTS), ("attention_mask", ATTENTION_MASKS),
                              ("rotary", ROTARY_KINDS), ("soft_cap", SOFT_CAPS),
                              ("soft_cap_rounding", SOFT_CAP_ROUNDINGS), ("rms_norm_eps", RMS_NORM_EPS)):
            _choice(getattr(self, name), choices, name)


@dataclass(frozen=True)
class ModelConfig:
    """GPT(vocab_size=50257, num_layers=12, num_heads=6, model_dim=768) and its fixed patterns.

    dtype_policy "record": bf16 embeddings and activations, FP8 head in training (fp8_head);
    "fp32": all fp32 with a plain head (parity runs); "bf16_model": #15's whole-model bf16
    (bf16 embeddings and scalars, fp32 linear weights holding bf16-rounded initial values);
    "autocast": #8/#9's fp32 parameters and stream with bf16 matmuls."""

    vocab_size: int = VOCAB_SIZE
    num_layers: int = 12
    num_heads: int = 6
    model_dim: int = 768
    eot_id: int = EOT_ID
    rope_max_len: int = 65536
    value_embed_slots: tuple[int | None, ...] = (0, 1, 2, None, None, None, None, None, None, 0, 1, 2)
    long_window_layers: tuple[int, ...] = (0, 4, 11)
    attention_free_layers: tuple[int, ...] = (7,)
    dtype_policy: str = "record"
    fp8_grad_scale: float = RECORD_FP8_GRAD_SCALE
    qkv_layout: str = "merged"  # the record's (3, D, D) qkv_w; "separate": q_w, k_w, v_w (D, D)
    attn_scale: float | None = 0.12  # None: head_dim ** -0.5 (#8-#18's SDPA / FlexAttention default)
    logit_cap: float = 30.0  # "sigmoid": cap * sigmoid(z / temperature); "tanh": cap * tanh(z / cap)
    logit_cap_temperature: float = 7.5
    lineage: ModelLineage = field(default_factory=ModelLineage)  # #8-#18's model switches

    def __post_init__(self) -> None:
        for name in ("vocab_size", "num_layers", "num_heads", "model_dim", "rope_max_len"):
            _check(getattr(self, name) > 0, name, f"must be positive, got {getattr(self, name)}")
        _check(self.model_dim % self.num_heads == 0, "num_heads", f"does not divide model_dim {self.model_dim}")
        _check(len(self.value_embed_slots) == self.num_layers, "value_embed_slots",
               f"has {len(self.value_embed_slots)} entries for {self.num_layers} layers")
        _check(self.qkv_layout in ("merged", "separate"), "qkv_layout",
               f"must be 'merged' or 'separate', got {self.qkv_layout!r}")
        _choice(self.dtype_policy, DTYPE_POLICIES, "dtype_policy")
        uses_value_embeds = any(slot is not None for slot in self.value_embed_slots)
        _check(not (self.lineage.value_residual and uses_value_embeds), "value_residual",
               "and value embeddings (value_embed_slots) both rewrite v: choose one")
        _check(not (self.lineage.value_residual and self.lineage.attn_value_lambdas), "value_residual",
               "has its own attn.lamb: turn attn_value_lambdas off")
        _check(self.lineage.attn_value_lambdas or not uses_value_embeds, "value_embed_slots",
               "value embeddings need attn_value_lambdas=True")
        _check(self.lineage.attention_mask == "document_blocks" or set(self.long_window_layers) == set(range(self.num_layers)),
               "long_window_layers", f"attention_mask {self.lineage.attention_mask!r} has one window for every layer: list every layer")

    @property
    def head_dim(self) -> int:
        return self.model_dim // self.num_heads

    @property
    def padded_vocab_size(self) -> int:
        return next_multiple(self.vocab_size, 128)

    @property
    def embedding_rows(self) -> int:
        return self.padded_vocab_size if self.lineage.embed_rows == "padded" else self.vocab_size

    @property
    def attention_scale(self) -> float:
        return self.head_dim**-0.5 if self.attn_scale is None else self.attn_scale


@dataclass(frozen=True)
class OptimLineage:
    """The lineage's optimizer and LR-schedule switches (#8-#15) (meanings as in jaxgpt.config.OptimLineage); Sub3Min's by default."""

    muon_momentum_form: str = "ema"  # "sgd": buf = m buf + g, u = g + m buf (#8/#9)
    ns_iteration: str = "poly"  # "chain": B = A X, X = a X + b B + (c A) B (#8/#9)
    cooldown_whole_steps: bool = False  # K = round(cooldown_frac * steps) steps, factor (steps - s) / K (#8-#15)

    def __post_init__(self) -> None:
        _choice(self.muon_momentum_form, MUON_MOMENTUM_FORMS, "muon_momentum_form")
        _choice(self.ns_iteration, NS_ITERATIONS, "ns_iteration")


@dataclass(frozen=True)
class OptimConfig:
    """Muon over hidden matrices, Adam over the rest, and their schedules (RECORD.md 5-7)."""

    muon_lr: float = 0.05
    muon_momentum_start: float = 0.85
    muon_momentum_end: float = 0.95
    muon_momentum_warmup_steps: int = 300
    ns_steps: int = 5
    ns_dtype: str = "bf16"  # the record's; "fp32" isolates how much of a mismatch is bf16 NS
    head_lr: float = 0.008
    embed_lr: float = 0.6
    scalar_lr: float = 0.04
    adam_b1: float = 0.8
    adam_b2: float = 0.95
    adam_eps: float = 1e-10
    cooldown_frac: float = 0.4
    final_lr_frac: float = 0.1
    lineage: OptimLineage = field(default_factory=OptimLineage)  # the lineage's optimizer and LR-schedule switches (#8-#15)

    def __post_init__(self) -> None:
        _check(self.ns_dtype in ("bf16", "fp32"), "ns_dtype", f"must be 'bf16' or 'fp32', got {self.ns_dtype!r}")
        _check(0.0 <= self.cooldown_frac <= 1.0, "cooldown_frac", f"must be in [0, 1], got {self.cooldown_frac}")


@dataclass(frozen=True)
class TrainLineage:
    """The lineage's window-schedule and data-stream switches (#8-#18) (meanings as in jaxgpt.config.TrainLineage); Sub3Min's by default."""

    window_schedule: str = "blocks_ceil"  # "blocks_floor" (#18), "tokens" (#15), "none" (#8/#9)
    repeat_first_batch: bool = False  # #8/#9: steps 0 and 1 both train on batch 0
    shard_switch: str = "global"  # "per_rank" (#15), "per_rank_inclusive" (#8/#9)
    data_ranks: int = 8  # the record's ranks, whose offsets the per-rank shard switch uses

    def __post_init__(self) -> None:
        _choice(self.window_schedule, WINDOW_SCHEDULES, "window_schedule")
        _choice(self.shard_switch, SHARD_SWITCHES, "shard_switch")
        _check(self.data_ranks > 0, "data_ranks", f"must be positive, got {self.data_ranks}")


@dataclass(frozen=True)
class TrainConfig:
    """The record's Hyperparameters: files, steps, batch and validation sizes (global tokens).
    Validation at step 0, every `val_every` steps and after the last step (RECORD.md section 7,
    step 3); `val_every` 0 is the record's `val_loss_every = 0` ("only at the end"): after the
    last step only, no step-0 validation. `val_tokens` 0: none at all."""

    train_files: str = "data/fineweb10B/fineweb_train_*.bin"
    val_files: str = "data/fineweb10B/fineweb_val_*.bin"
    steps: int = 1393
    batch_tokens: int = 8 * 64 * 1024
    seq_len: int = 64 * 1024
    val_every: int = 125  # validate at step 0, every K and the last step; 0: the last only (record's val_loss_every)
    val_tokens: int = 10_485_760
    # The window at the last step (each schedule grows to it). No cap: FlexAttention's block masks
    # take any window, where jaxgpt's kernels refuse one beyond their `max_window_blocks`.
    window_max_tokens: int = 1728
    devices: int | None = None
    seed: int = 0
    out_dir: str = "runs"  # logs/ and checkpoints/<run id>/ go here
    checkpoint_every: int = 0  # 0: none during the run (--save-checkpoint PATH still writes the end)
    keep_checkpoints: int = 3  # the newest K step files of checkpoints/<run id>/ are kept
    cycle_data: bool = False  # wrap around to the first shard (#8-#18)
    lineage: TrainLineage = field(default_factory=TrainLineage)  # the lineage's window-schedule and data-stream switches (#8-#18)

    def __post_init__(self) -> None:
        _check(self.seq_len > 0 and self.seq_len % BLOCK_SIZE == 0, "seq_len",
               f"must be a positive multiple of {BLOCK_SIZE}, got {self.seq_len}")
        _check(self.batch_tokens > 0 and self.batch_tokens % self.seq_len == 0, "batch_tokens",
               f"{self.batch_tokens} is not a positive multiple of seq_len {self.seq_len}")
        _check(self.steps >= 0, "steps", f"must be >= 0, got {self.steps}")
        _check(self.val_every >= 0, "val_every", f"must be >= 0 (0: validate after the last step only), got {self.val_every}")
        _check(self.val_tokens >= 0, "val_tokens", f"must be >= 0, got {self.val_tokens}")
        _check(self.window_max_tokens >= 0, "window_max_tokens", f"must be >= 0, got {self.window_max_tokens}")
        _check(self.checkpoint_every >= 0, "checkpoint_every", f"must be >= 0, got {self.checkpoint_every}")
        _check(self.keep_checkpoints >= 1, "keep_checkpoints", f"must be >= 1, got {self.keep_checkpoints}")
        _check(self.lineage.shard_switch == "global" or self.batch_tokens % self.lineage.data_ranks == 0,
               "data_ranks", f"shard_switch {self.lineage.shard_switch!r} splits each batch over {self.lineage.data_ranks} record "
               f"ranks; {self.batch_tokens} tokens do not split that way")


def with_fields(config: Any, **fields: Any) -> Any:
    """A validated copy of a section's config with `fields` replaced; lineage switches named flat
    go into `config.lineage` (or into a `lineage=` given beside them)."""
    lineage = fields.pop("lineage", config.lineage)
    switches = {name: fields.pop(name) for name in {f.name for f in dataclasses.fields(lineage)} & fields.keys()}
    return replace(config, **fields, lineage=replace(lineage, **switches) if switches else lineage)


def nest_lineage(saved: dict[str, Any]) -> dict[str, Any]:
    """A saved preset's dict in today's form: lineage switches written flat in their section (the
    form before each section had its `lineage` object) moved under "<section>"/"lineage"."""
    nested = dict(saved)
    for section, lineage_class in (("model", ModelLineage), ("optim", OptimLineage), ("train", TrainLineage)):
        values = saved.get(section)
        if not isinstance(values, dict) or not isinstance(values.get("lineage", {}), dict):
            continue  # not a preset's shape: left as it is, for the caller's check to name
        names = {f.name for f in dataclasses.fields(lineage_class)}
        nested[section] = {k: v for k, v in values.items() if k not in names}
        nested[section]["lineage"] = {**{k: v for k, v in values.items() if k in names}, **values.get("lineage", {})}
    return nested


_WINDOW_SCHEDULE_OF_MASK = {"document_blocks": ("blocks_ceil", "blocks_floor"), "document_tokens": ("tokens",),
                            "causal": ("none",)}


@dataclass(frozen=True)
class Preset:
    model: ModelConfig = field(default_factory=ModelConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    train: TrainConfig = field(default_factory=TrainConfig)

    def __post_init__(self) -> None:
        allowed = _WINDOW_SCHEDULE_OF_MASK[self.model.lineage.attention_mask]
        _check(self.train.lineage.window_schedule in allowed, "window_schedule",
               f"{self.train.lineage.window_schedule!r} does not give attention_mask {self.model.lineage.attention_mask!r} its window "
               f"(it takes {' or '.join(map(repr, allowed))})")
