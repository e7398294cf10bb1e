"""Configuration of the model and of a training run, as frozen dataclasses.

Every number of the Sub3Min record lives here once (see docs/spec/RECORD.md), as the defaults of
the model, optimizer and run configs, which a `Preset` holds together; the named presets built
from them (`record`, `tiny`, `smoke`, the lineage's records) and their registry are jaxgpt.presets.

The lineage (docs/spec/LINEAGE.md: #8 UntieEmbed, #9 ShortcutsTweaks, #15 UNetValueEmbedsTweaks,
#18 SoftCap) is a set of switches held apart in one object per section: `ModelConfig.lineage`,
`OptimConfig.lineage` (the optimizers, the LR schedule), `TrainConfig.lineage` (the window
schedule, the data stream); their defaults are Sub3Min's; `with_fields` takes them by their flat
names, as the CLI does. Mixes that cannot mean anything are refused by `__post_init__` (within a
section) and `check_preset` (across sections), naming the conflict. Each field's comment is its
flag's help (runkit.flags; parity_tests/test_cli_parity.py compares both trainers' flags). The
JSON form of a preset: jaxgpt.config_json.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

BLOCK_SIZE = 128  # FlexAttention's mask block: windows and sequence lengths count in these.
TOKEN_WINDOW_STEP = 64  # #15's token window grows in steps of 64 tokens
EOT_ID = 50256  # GPT-2 `<|endoftext|>`; every document starts with it.
GPT2_VOCAB_SIZE = 50257
MAX_POSITIONS = 2**31 - 1  # rotary positions are int32

DTypePolicy = Literal["record", "fp32", "bf16_model", "autocast"]  # what each keeps in which dtype: ModelConfig
AttentionBackend = Literal["auto", "dense", "blocked", "pallas", "mosaic"]  # auto: attention.resolve_backend
RematPolicy = Literal["none", "block", "block_dots"]
NSDType = Literal["bf16", "fp32"]
QKVLayout = Literal["merged", "separate"]
# Lineage switches (LINEAGE.md section 7); the first value of each is Sub3Min's.
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


# Frozen configs change by copy; dataclasses.replace runs __post_init__, so the copy is validated.
replace = dataclasses.replace


def next_multiple(value: int, multiple: int) -> int:
    """Smallest multiple of `multiple` that is >= `value`."""
    return -(-value // multiple) * multiple


def _fail(field_name: str, message: str) -> None:
    raise ValueError(f"invalid config field `{field_name}`: {message}")


def _check_choice(field_name: str, value: str, choices: object) -> None:
    """`value` must be one of the strings of the Literal type `choices`."""
    if value not in get_args(choices):
        _fail(field_name, f"must be one of {', '.join(map(repr, get_args(choices)))}, got {value!r}")


RECORD_DEVICE_TOKENS = 65536  # tokens of one rank's loss mean in the record (8 ranks x 64 Ki)
RECORD_FP8_GRAD_SCALE = 2.0**29  # the record's FP8 head gradient scale, for that mean


def fp8_grad_scale_for(tokens_per_mean: int, record_scale: float = RECORD_FP8_GRAD_SCALE) -> float:
    """The FP8 head's gradient scale for a loss averaged over `tokens_per_mean` tokens.

    The record's 2^29 is sized for a per-rank mean over 65,536 tokens (|G| <= 2^-16); a mean
    over k times as many tokens has gradients k times smaller, so the scale grows by k and the
    quantised e5m2 gradients stay the record's (2^29 with 2,048 tokens overflows e5m2 to inf)."""
    return record_scale * tokens_per_mean / RECORD_DEVICE_TOKENS


@dataclass(frozen=True)
class ModelLineage:
    """The model switches of the lineage (LINEAGE.md sections 3-6): what #8-#18 did differently.
    Every default is Sub3Min's, so the record's model never sets one; the variant each picks is
    chosen once, when a module is built (jaxgpt/lineage.py)."""

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
                              ("rotary", Rotary), ("soft_cap", SoftCap), ("soft_cap_rounding", SoftCapRounding),
                              ("rms_norm_eps", RMSNormEps)):
            _check_choice(name, getattr(self, name), choices)


@dataclass(frozen=True)
class ModelConfig:
    """The GPT of the record. Defaults are the 124M-class Sub3Min model.

    dtype_policy:
      "record":     bf16 embeddings and activations, fp32 master weights cast to bf16 at use,
                    FP8 lm_head in training when fp8_head (plain bf16 head in eval), CE in fp32.
      "fp32":       everything in fp32 and a plain fp32 head; for parity tests.
      "bf16_model": #15's: bf16 embeddings, scalars and activations, fp32 linear weights whose
                    initial values are bf16-rounded.
      "autocast":   #8/#9's: fp32 parameters and residual stream, bf16 matmuls (torch.autocast).
    """

    vocab_size: int = GPT2_VOCAB_SIZE  # vocabulary size (the head pads it to a multiple of 128)
    num_layers: int = 12  # transformer blocks (even: the U-net pairs them)
    num_heads: int = 6  # attention heads
    model_dim: int = 768  # model width D
    block_size: int = BLOCK_SIZE  # mask block in tokens
    eot_id: int = EOT_ID  # end-of-text token id (every document starts with it)
    # Attention scale: Sub3Min's fixed 0.12; none: head_dim ** -0.5 (#8-#18's SDPA and
    # FlexAttention default).
    attn_scale: float | None = 0.12
    # Logit soft-cap constant: soft_cap sigmoid is cap * sigmoid(z / temperature), tanh is
    # cap * tanh(z / cap).
    logit_cap: float = 30.0
    logit_cap_temperature: float = 7.5  # the sigmoid soft-cap's temperature
    rope_max_len: int = 65536  # length of the rotary table
    mlp_ratio: int = 4  # MLP hidden width / model width
    # Per-layer patterns, written for the record's 12 layers (RECORD.md 2.3).
    value_embed_slots: tuple[int | None, ...] = (0, 1, 2, None, None, None, None, None, None, 0, 1, 2)
    long_window_layers: tuple[int, ...] = (0, 4, 11)
    attention_free_layers: tuple[int, ...] = (7,)
    # What is kept in which dtype: record (bf16 + FP8 head as the record), fp32 (all fp32 with a
    # plain head, for parity; Newton-Schulz stays bf16), bf16_model (#15's whole-model bf16),
    # autocast (#8/#9's bf16 matmuls over fp32); the class docstring says what each keeps.
    dtype_policy: DTypePolicy = "record"
    # Attention implementation: blocked (block-sparse in XLA), dense, pallas (the block-sparse
    # Triton kernel, interpreted on a CPU), mosaic (the same on Hopper through Mosaic GPU, bf16),
    # auto (pallas on a GPU, blocked elsewhere).
    attention_backend: AttentionBackend = "blocked"
    # Largest attention window in blocks the compiled step supports (the window itself is a traced
    # value, so the window schedule never recompiles the step); a schedule ending past it is refused.
    max_window_blocks: int = 14
    # Cross-entropy over this many tokens at a time (none: all at once); the same mean either way.
    loss_chunk_tokens: int | None = None
    # FP8 head: gradients are multiplied by this before the e5m2 cast (the record's 2^29, sized for
    # a per-rank mean over 65,536 tokens; other means: fp8_grad_scale_for). Fewer than ~8.7k tokens
    # per mean with 2^29 can overflow e5m2 (max 57344; rounds to inf from 61440) at init.
    fp8_grad_scale: float = RECORD_FP8_GRAD_SCALE
    # Rematerialisation of each block in the backward (same math, less memory): none saves what XLA
    # keeps; block only each block's inputs (jax.checkpoint); block_dots also its matmul outputs.
    # none: on XLA:CPU's plan block saves only ~10% (docs/BENCHMARKS.md, "Record step memory").
    remat: RematPolicy = "none"
    # Attention's input projection: merged is the record's one (3, D, D) `attn.qkv_w`; separate
    # holds `attn.q_w`, `attn.k_w`, `attn.v_w`, each (D, D), whose stack is the merged weight
    # (same numbers, three matmuls; the fusion study, docs/FUSION.md).
    qkv_layout: QKVLayout = "merged"

    lineage: ModelLineage = field(default_factory=ModelLineage)  # #8-#18's switches, Sub3Min's by default

    def __post_init__(self) -> None:
        for name in ("vocab_size", "num_layers", "num_heads", "model_dim", "block_size", "rope_max_len"):
            if getattr(self, name) <= 0:
                _fail(name, f"must be positive, got {getattr(self, name)}")
        if self.rope_max_len > MAX_POSITIONS:
            _fail("rope_max_len", f"{self.rope_max_len} is beyond {MAX_POSITIONS}: positions are int32")
        if self.model_dim % self.num_heads:
            _fail("num_heads", f"model_dim {self.model_dim} is not divisible by num_heads {self.num_heads}")
        if self.head_dim % 4:
            _fail("num_heads", f"head_dim {self.head_dim} must be a multiple of 4 (half-truncated rotary)")
        if not 0 <= self.eot_id < self.vocab_size:
            _fail("eot_id", f"{self.eot_id} is outside the vocabulary of {self.vocab_size}")
        if self.num_layers % 2 and self.lineage.unet_skips:
            _fail("num_layers", f"the U-net pairs encoder and decoder layers; got odd {self.num_layers}")
        if len(self.value_embed_slots) != self.num_layers:
            _fail("value_embed_slots", f"has {len(self.value_embed_slots)} entries for {self.num_layers} layers")
        for slot in self.value_embed_slots:
            if slot is not None and not 0 <= slot < self.num_value_embeds:
                _fail("value_embed_slots", f"slot {slot} out of range")
        for name in ("long_window_layers", "attention_free_layers"):
            for layer in getattr(self, name):
                if not 0 <= layer < self.num_layers:
                    _fail(name, f"layer {layer} out of range for {self.num_layers} layers")
        _check_choice("dtype_policy", self.dtype_policy, DTypePolicy)
        _check_choice("attention_backend", self.attention_backend, AttentionBackend)
        if self.max_window_blocks < 1:
            _fail("max_window_blocks", f"must be >= 1, got {self.max_window_blocks}")
        if self.loss_chunk_tokens is not None and self.loss_chunk_tokens <= 0:
            _fail("loss_chunk_tokens", f"must be positive or None, got {self.loss_chunk_tokens}")
        _check_choice("remat", self.remat, RematPolicy)
        _check_choice("qkv_layout", self.qkv_layout, QKVLayout)
        if not self.fp8_grad_scale > 0:
            _fail("fp8_grad_scale", f"must be positive, got {self.fp8_grad_scale}")
        if self.attn_scale is not None and not self.attn_scale > 0:
            _fail("attn_scale", f"must be positive or None, got {self.attn_scale}")
        self._check_lineage_mix()

    def _check_lineage_mix(self) -> None:
        """Refuse switch values that cannot be combined, naming both sides of the conflict."""
        uses_value_embeds = any(slot is not None for slot in self.value_embed_slots)
        if self.lineage.value_residual and uses_value_embeds:
            _fail("value_residual", "and value embeddings (value_embed_slots) both rewrite v; the lineage "
                  "replaced the one by the other (#14): choose one")
        if self.lineage.value_residual and self.lineage.attn_value_lambdas:
            _fail("value_residual", "mixes v with its own scalar attn.lamb; attn_value_lambdas (2,) would be a "
                  "second mixing weight for the same v: turn attn_value_lambdas off")
        if uses_value_embeds and not self.lineage.attn_value_lambdas:
            _fail("value_embed_slots", "value embeddings are mixed into v by attn.lambdas: they need "
                  "attn_value_lambdas=True (or no slots)")
        if self.lineage.attention_mask != "document_blocks":
            if set(self.long_window_layers) != set(range(self.num_layers)):
                _fail("long_window_layers", f"attention_mask {self.lineage.attention_mask!r} has one window for every "
                      "layer (long and short windows exist only for 'document_blocks'): list every layer")
            if self.lineage.attention_mask == "document_tokens" and self.attention_backend in ("pallas", "mosaic"):
                _fail("attention_backend", f"the {self.attention_backend} kernel applies block windows only; "
                      "attention_mask 'document_tokens' needs 'blocked' or 'dense' ('auto' picks 'blocked')")

    @property
    def head_dim(self) -> int:
        return self.model_dim // self.num_heads

    @property
    def padded_vocab_size(self) -> int:
        """lm_head rows: the vocabulary padded to a multiple of 128 (50257 -> 50304)."""
        return next_multiple(self.vocab_size, 128)

    @property
    def embedding_rows(self) -> int:
        """Rows of every token and value embedding table (`embed_rows`)."""
        return self.padded_vocab_size if self.lineage.embed_rows == "padded" else self.vocab_size

    @property
    def attention_scale(self) -> float:
        """The attention's score scale: `attn_scale`, or head_dim ** -0.5 when None."""
        return self.head_dim**-0.5 if self.attn_scale is None else self.attn_scale

    @property
    def num_value_embeds(self) -> int:
        """Value embeddings addressed by value_embed_slots (tables, or chunks of one table)."""
        return 1 + max((s for s in self.value_embed_slots if s is not None), default=-1)

    @property
    def value_embed_tables(self) -> tuple[int, int]:
        """(number of tables, width of each): (k, D) for "tables", (1, k D) for "chunks"."""
        count = self.num_value_embeds
        if self.lineage.value_embed_layout == "chunks" and count:
            return 1, count * self.model_dim
        return count, self.model_dim

    @property
    def num_encoder_layers(self) -> int:
        return self.num_layers // 2

    @property
    def hidden_dim(self) -> int:
        return self.mlp_ratio * self.model_dim

    def has_attention(self, layer: int) -> bool:
        return layer not in self.attention_free_layers

    def uses_long_window(self, layer: int) -> bool:
        return layer in self.long_window_layers


@dataclass(frozen=True)
class OptimLineage:
    """The lineage's optimizer and LR-schedule switches (#8-#15): every default is Sub3Min's (LINEAGE.md section 7)."""

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
        _check_choice("muon_momentum_form", self.muon_momentum_form, MuonMomentumForm)
        _check_choice("ns_iteration", self.ns_iteration, NSIteration)


@dataclass(frozen=True)
class OptimConfig:
    """The record's optimizers (RECORD.md sections 5-7)."""

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
    # The embedding tables and their Adam moments in bf16, as the record keeps them (none: follow
    # the dtype policy, bf16 under record, fp32 under fp32).
    bf16_embeddings: bool | None = None
    lineage: OptimLineage = field(default_factory=OptimLineage)  # the lineage's optimizer and LR-schedule switches (#8-#15)

    def __post_init__(self) -> None:
        if not 0.0 <= self.cooldown_frac <= 1.0:
            _fail("cooldown_frac", f"must be in [0, 1], got {self.cooldown_frac}")
        _check_choice("ns_dtype", self.ns_dtype, NSDType)


@dataclass(frozen=True)
class TrainLineage:
    """The lineage's window-schedule and data-stream switches (#8-#18): every default is Sub3Min's (LINEAGE.md section 7)."""

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
        _check_choice("window_schedule", self.window_schedule, WindowSchedule)
        _check_choice("shard_switch", self.shard_switch, ShardSwitch)
        if self.data_ranks <= 0:
            _fail("data_ranks", f"must be positive, got {self.data_ranks}")


@dataclass(frozen=True)
class TrainConfig:
    """One training run. `batch_tokens` is global; each device gets batch_tokens / devices
    tokens as batch_tokens / (devices * seq_len) packed sequences of `seq_len` tokens.
    Validation at step 0, every `val_every` steps and after the last step (RECORD.md section 7,
    step 3); `val_every` 0 is the record script's `val_loss_every = 0` ("only at the end"): after
    the last step only, no step-0 validation. `val_tokens` 0: none at all."""

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
        if self.seq_len <= 0 or self.seq_len % BLOCK_SIZE:
            _fail("seq_len", f"must be a positive multiple of {BLOCK_SIZE}, got {self.seq_len}")
        if self.batch_tokens <= 0 or self.batch_tokens % self.seq_len:
            _fail("batch_tokens", f"{self.batch_tokens} is not a positive multiple of seq_len {self.seq_len}")
        if self.steps < 0:
            _fail("steps", f"must be >= 0, got {self.steps}")
        if self.val_every < 0:
            _fail("val_every", f"must be >= 0 (0: validate after the last step only), got {self.val_every}")
        if self.val_tokens < 0:
            _fail("val_tokens", f"must be >= 0, got {self.val_tokens}")
        if self.window_max_tokens < 0:
            _fail("window_max_tokens", f"must be >= 0, got {self.window_max_tokens}")
        if self.lineage.shard_switch != "global" and self.batch_tokens % self.lineage.data_ranks:
            _fail("data_ranks", f"shard_switch {self.lineage.shard_switch!r} splits each batch over data_ranks="
                  f"{self.lineage.data_ranks} record ranks, but {self.batch_tokens} tokens do not split that way: "
                  "set data_ranks to a divisor, or shard_switch 'global'")

    @property
    def sequences_per_step(self) -> int:
        return self.batch_tokens // self.seq_len


def with_fields(config: Any, **fields: Any) -> Any:
    """A validated copy of a section's config (ModelConfig, OptimConfig or TrainConfig) with `fields`
    replaced; lineage switches named flat (`value_residual=True`, as the CLI's flags and the tests
    write them) go into `config.lineage` (or into a `lineage=` given beside them)."""
    lineage = fields.pop("lineage", config.lineage)
    switches = {name: fields.pop(name) for name in {f.name for f in dataclasses.fields(lineage)} & fields.keys()}
    return replace(config, **fields, lineage=replace(lineage, **switches) if switches else lineage)


# The window schedule each attention mask takes its window from.
_WINDOW_SCHEDULES = {
    "document_blocks": ("blocks_ceil", "blocks_floor"),
    "document_tokens": ("tokens",),
    "causal": ("none",),
}


def last_window(max_tokens: int, schedule: str, block_size: int = BLOCK_SIZE) -> tuple[int, int | None] | None:
    """(blocks, tokens): the largest window a `schedule` ending at `max_tokens` passes, its value
    at the last step s = N (every schedule grows with s), in the blocks the attention counts
    (the cap `max_window_blocks` bounds these) and, for #15's token window, in tokens; None for
    "none" (plain causal attention, no window). The schedules' own arithmetic at s / N = 1
    (`jaxgpt.schedules.window_value`, whose float64 M s / N is exactly M there): "blocks_ceil"
    max(1, ceil(M / 128)); "blocks_floor" floor((128 + M) / 128); "tokens" sw = 64 floor((64 + M)
    / 64) tokens, attended within ceil(sw / block_size) blocks (`block_size`: the model's)."""
    if schedule == "blocks_ceil":
        return max(1, -(-max_tokens // BLOCK_SIZE)), None
    if schedule == "blocks_floor":
        return (BLOCK_SIZE + max_tokens) // BLOCK_SIZE, None
    if schedule == "tokens":
        tokens = TOKEN_WINDOW_STEP * ((TOKEN_WINDOW_STEP + max_tokens) // TOKEN_WINDOW_STEP)
        return -(-tokens // block_size), tokens
    return None


def _largest_fitting_window(schedule: str, block_size: int, cap: int, above: int) -> int | None:
    """The largest window_max_tokens below `above` whose last window fits in `cap` blocks (None: none does)."""
    def fits(max_tokens: int) -> bool:
        return (last_window(max_tokens, schedule, block_size) or (0, None))[0] <= cap

    if not fits(0):
        return None
    low, high = 0, above  # fits(low), not fits(high): the last window grows with window_max_tokens
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if fits(middle) else (low, middle)
    return low


def check_preset(model: ModelConfig, optim: OptimConfig, train: TrainConfig) -> None:
    """Refuse cross-section mixes that cannot mean anything, naming the conflict."""
    del optim  # no optimizer switch depends on another section
    allowed = _WINDOW_SCHEDULES[model.lineage.attention_mask]
    if train.lineage.window_schedule not in allowed:
        _fail("window_schedule", f"{train.lineage.window_schedule!r} does not give the window attention_mask "
              f"{model.lineage.attention_mask!r} takes (it takes {' or '.join(map(repr, allowed))})")
    # The kernels attend over at most max_window_blocks blocks (blocked, pallas and mosaic clamp a
    # larger window to it, dense and torch_ref do not): the schedule's last window must fit.
    last = last_window(train.window_max_tokens, train.lineage.window_schedule, model.block_size)
    if last is not None and last[0] > model.max_window_blocks:
        blocks, tokens = last
        shown = f"{blocks} blocks" if tokens is None else f"a {tokens}-token window, {blocks} blocks"
        lower = _largest_fitting_window(train.lineage.window_schedule, model.block_size, model.max_window_blocks,
                                        train.window_max_tokens)
        _fail("window_max_tokens", f"{train.window_max_tokens} ({shown} at the last step) exceeds `max_window_blocks` "
              f"{model.max_window_blocks}: raise max_window_blocks to {blocks} or lower window_max_tokens"
              + ("" if lower is None else f" to {lower}"))


@dataclass(frozen=True)
class Preset:
    model: ModelConfig = field(default_factory=ModelConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    train: TrainConfig = field(default_factory=TrainConfig)

    def __post_init__(self) -> None:
        check_preset(self.model, self.optim, self.train)
