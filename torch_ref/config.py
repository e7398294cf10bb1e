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

Each field's comment is its command-line flag's help (runkit.flags), word for word jaxgpt's:
parity_tests/test_cli_parity.py compares the two trainers' flags, help included.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

BLOCK_SIZE = 128  # FlexAttention's block: masks, windows and sequence lengths count in these
EOT_ID = 50256  # GPT-2 <|endoftext|>, prepended to every document (RECORD.md 8.4)
VOCAB_SIZE = 50257  # GPT-2's vocabulary; the head pads it to a multiple of 128 (50304)
RECORD_DEVICE_TOKENS = 65536  # tokens of one rank's loss mean in the record (8 ranks x 64 Ki)
RECORD_FP8_GRAD_SCALE = 2.0**29  # the FP8 head's gradient scale, sized for that mean
MAX_POSITIONS = 2**31 - 1  # rotary positions are int32


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


def _choice(value: str, literal: Any, name: str) -> None:
    choices = get_args(literal)
    _check(value in choices, name, f"must be one of {', '.join(map(repr, choices))}, got {value!r}")


# The choices of the string fields, as Literal types (the command line's choices come from them);
# the first of each lineage switch is Sub3Min's (LINEAGE.md section 7).
DTypePolicy = Literal["record", "fp32", "bf16_model", "autocast"]
NSDType = Literal["bf16", "fp32"]
QKVLayout = Literal["merged", "separate"]
EmbedRows = Literal["vocab", "padded"]
LinearInit = Literal["record", "torch_default"]
ValueEmbedLayout = Literal["tables", "chunks"]
AttentionMask = Literal["document_blocks", "document_tokens", "causal"]
Rotary = Literal["half_truncated", "full", "full_bf16_freq", "full_bf16_freq_eager"]
SoftCap = Literal["sigmoid", "tanh", "none"]
SoftCapRounding = Literal["once", "per_op"]
RMSNormEps = Literal["fp32", "as_run"]
MuonMomentumForm = Literal["ema", "sgd"]
NSIteration = Literal["poly", "chain"]
WindowSchedule = Literal["blocks_ceil", "blocks_floor", "tokens", "none"]
ShardSwitch = Literal["global", "per_rank", "per_rank_inclusive"]


@dataclass(frozen=True)
class ModelLineage:
    """The lineage's model switches; every default is
    Sub3Min's, so the record's model never sets one."""

    # Rows of the token and value embedding tables: vocab (Sub3Min's 50257) or padded (the head's
    # 50304, #8-#18; the padded rows are never read).
    embed_rows: EmbedRows = "vocab"
    # Linear init bound: record, sqrt(3)/2/sqrt(fan_in) (#19 on), or torch_default, nn.Linear's
    # 1/sqrt(fan_in) (#8-#18).
    linear_init: LinearInit = "record"
    block_lambdas: bool = True  # x <- l0 x + l1 x0 before each block (#9 on); off: no `lambdas`, no x0
    unet_skips: bool = True  # U-net `skip_weights`: decoder layer j adds encoder output L/2-1-j (#11 on)
    # Value embeddings as separate (V, D) tables (#18, Sub3Min) or the D-wide chunks of one (V, k D)
    # table (#15's `vte`).
    value_embed_layout: ValueEmbedLayout = "tables"
    attn_value_lambdas: bool = True  # attention value lambdas attn.lambdas (2,): v = l0 v (+ l1 ve) (#15 on)
    # #9's value residual: attn.lamb () in every layer, v = (1 - lamb) v + lamb v_0 with v_0 layer
    # 0's raw value projection.
    value_residual: bool = False
    # document_blocks: document-causal within a window of W blocks (W_long / W_short by layer;
    # Sub3Min, #18); document_tokens: #15's document-causal token window sw and block window
    # ceil(sw / 128); causal: #8/#9's plain causal attention (no documents, no window).
    attention_mask: AttentionMask = "document_blocks"
    # Rotary tables and precision: half_truncated (Sub3Min, #18: fp32 tables and rotation); full
    # (#8/#9: 64 frequencies base 10000, fp32 angles, tables and rotation in the activation dtype);
    # full_bf16_freq (#15: inv_freq rounded to bf16 first, the compiled reading, LINEAGE.md 5.3);
    # full_bf16_freq_eager (the eager reading: positions and angles rounded to bf16).
    rotary: Rotary = "half_truncated"
    # The records' own bf16 roundings, as written (the full* rotary tables rounded to bf16 when
    # built; docs/NUMERICS.md), in every dtype policy; false: fp32 tables, rounded only by a bf16
    # policy at use.
    as_written_roundings: bool = True
    # Logit soft-cap: sigmoid (Sub3Min: cap * sigmoid(z / temperature) in fp32), tanh (#9-#18:
    # cap * tanh(z / cap) in the logits' dtype) or none (#8).
    soft_cap: SoftCap = "sigmoid"
    # The tanh cap on bf16 logits: once (computed in fp32, rounded to bf16 once: the compiled
    # chain, LINEAGE.md 8.4) or per_op (eager's rounding after /, tanh and *).
    soft_cap_rounding: SoftCapRounding = "once"
    fp8_head: bool = True  # FP8 lm_head in training under a bf16 policy (#19 on); never under fp32
    # RMSNorm eps: fp32 (2^-23 for every input, today's PyTorch) or as_run (2^-7 on bf16 inputs and
    # 2^-23 on fp32 ones: the records' PyTorch builds, LINEAGE.md 2.1).
    rms_norm_eps: RMSNormEps = "fp32"

    def __post_init__(self) -> None:
        for name, choices in (("embed_rows", EmbedRows), ("linear_init", LinearInit),
                              ("value_embed_layout", ValueEmbedLayout), ("attention_mask", AttentionMask),
                              ("rotary", Rotary), ("soft_cap", SoftCap),
                              ("soft_cap_rounding", SoftCapRounding), ("rms_norm_eps", RMSNormEps)):
            _choice(getattr(self, name), choices, name)


@dataclass(frozen=True)
class ModelConfig:
    """GPT(vocab_size=50257, num_layers=12, num_heads=6, model_dim=768) and its fixed patterns.

    dtype_policy "record": bf16 embeddings and activations, FP8 head in training (fp8_head);
    "fp32": all fp32 with a plain head (parity runs); "bf16_model": #15's whole-model bf16
    (bf16 embeddings and scalars, fp32 linear weights holding bf16-rounded initial values);
    "autocast": #8/#9's fp32 parameters and stream with bf16 matmuls."""

    vocab_size: int = VOCAB_SIZE  # vocabulary size (the head pads it to a multiple of 128)
    num_layers: int = 12  # transformer blocks (even: the U-net pairs them)
    num_heads: int = 6  # attention heads
    model_dim: int = 768  # model width D
    eot_id: int = EOT_ID  # end-of-text token id (every document starts with it)
    rope_max_len: int = 65536  # length of the rotary table
    value_embed_slots: tuple[int | None, ...] = (0, 1, 2, None, None, None, None, None, None, 0, 1, 2)
    long_window_layers: tuple[int, ...] = (0, 4, 11)
    attention_free_layers: tuple[int, ...] = (7,)
    # What is kept in which dtype: record (bf16 + FP8 head as the record), fp32 (all fp32 with a
    # plain head, for parity; Newton-Schulz stays bf16), bf16_model (#15's whole-model bf16),
    # autocast (#8/#9's bf16 matmuls over fp32); the class docstring says what each keeps.
    dtype_policy: DTypePolicy = "record"
    # FP8 head: gradients are multiplied by this before the e5m2 cast (the record's 2^29, sized for
    # a per-rank mean over 65,536 tokens; other means: fp8_grad_scale_for). Fewer than ~8.7k tokens
    # per mean with 2^29 can overflow e5m2 (max 57344; rounds to inf from 61440) at init.
    fp8_grad_scale: float = RECORD_FP8_GRAD_SCALE
    # Attention's input projection: merged is the record's one (3, D, D) `attn.qkv_w`; separate
    # holds `attn.q_w`, `attn.k_w`, `attn.v_w`, each (D, D), whose stack is the merged weight
    # (same numbers, three matmuls; the fusion study, docs/FUSION.md).
    qkv_layout: QKVLayout = "merged"
    # Attention scale: Sub3Min's fixed 0.12; none: head_dim ** -0.5 (#8-#18's SDPA and
    # FlexAttention default).
    attn_scale: float | None = 0.12
    # Logit soft-cap constant: soft_cap sigmoid is cap * sigmoid(z / temperature), tanh is
    # cap * tanh(z / cap).
    logit_cap: float = 30.0
    logit_cap_temperature: float = 7.5  # the sigmoid soft-cap's temperature
    lineage: ModelLineage = field(default_factory=ModelLineage)  # #8-#18's model switches

    def __post_init__(self) -> None:
        for name in ("vocab_size", "num_layers", "num_heads", "model_dim", "rope_max_len"):
            _check(getattr(self, name) > 0, name, f"must be positive, got {getattr(self, name)}")
        _check(self.rope_max_len <= MAX_POSITIONS, "rope_max_len", f"{self.rope_max_len} is beyond {MAX_POSITIONS}: "
               "positions are int32")
        _check(self.model_dim % self.num_heads == 0, "num_heads", f"does not divide model_dim {self.model_dim}")
        _check(len(self.value_embed_slots) == self.num_layers, "value_embed_slots",
               f"has {len(self.value_embed_slots)} entries for {self.num_layers} layers")
        _choice(self.qkv_layout, QKVLayout, "qkv_layout")
        _choice(self.dtype_policy, DTypePolicy, "dtype_policy")
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
    """The lineage's optimizer and LR-schedule switches (#8-#15); Sub3Min's by default."""

    # Muon's momentum: ema, buf = lerp(buf, g, 1 - m) and u = lerp(g, buf, m) (#15 on), or sgd,
    # buf = m buf + g and u = g + m buf (#8/#9).
    muon_momentum_form: MuonMomentumForm = "ema"
    # Newton-Schulz step: poly, B = bA + (cA)A and X = aX + BX (#11 on), or chain, B = AX and
    # X = aX + bB + (cA)B (#8/#9): the same polynomial, rounded differently in bf16.
    ns_iteration: NSIteration = "poly"
    # The cooldown as K = round(cooldown_frac * steps) whole steps, factor (steps - s) / K (#8-#15's
    # warmdown_iters).
    cooldown_whole_steps: bool = False

    def __post_init__(self) -> None:
        _choice(self.muon_momentum_form, MuonMomentumForm, "muon_momentum_form")
        _choice(self.ns_iteration, NSIteration, "ns_iteration")


@dataclass(frozen=True)
class OptimConfig:
    """Muon over hidden matrices, Adam over the rest, and their schedules (RECORD.md 5-7)."""

    muon_lr: float = 0.05  # Muon learning rate
    muon_momentum_start: float = 0.85  # Muon momentum at step 0
    muon_momentum_end: float = 0.95  # Muon momentum after the warmup
    muon_momentum_warmup_steps: int = 300  # steps of the Muon momentum warmup (it does not follow steps)
    ns_steps: int = 5  # Newton-Schulz iterations
    # Newton-Schulz precision: bf16 as the record; fp32 shows how much of a Muon mismatch is the
    # bf16 Newton-Schulz.
    ns_dtype: NSDType = "bf16"
    head_lr: float = 0.008  # Adam learning rate of the lm_head
    embed_lr: float = 0.6  # Adam learning rate of the embeddings
    scalar_lr: float = 0.04  # Adam learning rate of the scalars
    adam_b1: float = 0.8  # Adam beta1
    adam_b2: float = 0.95  # Adam beta2
    adam_eps: float = 1e-10  # Adam epsilon
    cooldown_frac: float = 0.4  # fraction of the steps at the end over which the LR decays linearly
    final_lr_frac: float = 0.1  # LR multiplier at the last step
    lineage: OptimLineage = field(default_factory=OptimLineage)  # the lineage's optimizer and LR-schedule switches (#8-#15)

    def __post_init__(self) -> None:
        _choice(self.ns_dtype, NSDType, "ns_dtype")
        _check(0.0 <= self.cooldown_frac <= 1.0, "cooldown_frac", f"must be in [0, 1], got {self.cooldown_frac}")


@dataclass(frozen=True)
class TrainLineage:
    """The lineage's window-schedule and data-stream switches (#8-#18); Sub3Min's by default."""

    # The window each step passes: blocks_ceil (Sub3Min's max(1, ceil(M s / N / 128)) blocks),
    # blocks_floor (#18's floor(((1 - s/N) 128 + (s/N)(128 + M)) / 128) blocks), tokens (#15's
    # 64 floor((64 + M s / N) / 64) tokens) or none (#8/#9: attention_mask causal).
    window_schedule: WindowSchedule = "blocks_ceil"
    repeat_first_batch: bool = False  # steps 0 and 1 both train on the first batch (#8/#9's loader)
    # When a rank leaves a shard: global, when pos + B + 1 >= len, tested before reading (Sub3Min,
    # #18); per_rank, rank r of data_ranks tests its own pos + r B / data_ranks + B + 1 >= len
    # after reading (#15); per_rank_inclusive, the same with > (#8/#9).
    shard_switch: ShardSwitch = "global"
    data_ranks: int = 8  # the record ranks whose offsets the per-rank shard switch tests (8 in the records)

    def __post_init__(self) -> None:
        _choice(self.window_schedule, WindowSchedule, "window_schedule")
        _choice(self.shard_switch, ShardSwitch, "shard_switch")
        _check(self.data_ranks > 0, "data_ranks", f"must be positive, got {self.data_ranks}")


@dataclass(frozen=True)
class TrainConfig:
    """The record's Hyperparameters: files, steps, batch and validation sizes (global tokens).
    Validation at step 0, every `val_every` steps and after the last step (RECORD.md section 7,
    step 3); `val_every` 0 is the record's `val_loss_every = 0` ("only at the end"): after the
    last step only, no step-0 validation. `val_tokens` 0: none at all."""

    train_files: str = "data/fineweb10B/fineweb_train_*.bin"  # glob of training shards (sorted; read in order)
    val_files: str = "data/fineweb10B/fineweb_val_*.bin"  # glob of validation shards (read from the start)
    steps: int = 1393  # training steps N; the LR cooldown and the window warmup follow N
    batch_tokens: int = 8 * 64 * 1024  # global batch in tokens per step (a multiple of seq_len * devices)
    seq_len: int = 64 * 1024  # tokens per packed sequence T (a multiple of 128)
    # Validate at step 0, every K steps and after the last step; 0: after the last step only (the
    # record's val_loss_every 0, "only at the end").
    val_every: int = 125
    val_tokens: int = 10_485_760  # validation tokens per evaluation (0: no validation)
    # The attention window at the last step, in tokens (1728 in the record); each window schedule
    # grows to it.
    window_max_tokens: int = 1728
    # Devices (one process each in torch_ref) the batch is split over; none: every visible device
    # (jaxgpt), torchrun's WORLD_SIZE or 1 (torch_ref).
    devices: int | None = None
    seed: int = 0  # parameter init seed (ignored with --init-from)
    out_dir: str = "runs"  # where logs/, metrics and checkpoints/<run id>/ go
    checkpoint_every: int = 0  # save a checkpoint every K steps and at the end (0: never; --save-checkpoint: the end)
    keep_checkpoints: int = 3  # keep only the newest K checkpoints
    cycle_data: bool = False  # start again at the first training shard when the shards run out (#8-#18)
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
