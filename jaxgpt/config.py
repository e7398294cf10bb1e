"""Configuration of the model and of a training run, as frozen dataclasses.

Every number of the Sub3Min record lives here once (see docs/spec/RECORD.md); the
`record` preset reproduces it and the `tiny` preset shrinks the widths and lengths so that
the same code runs on a CPU while every per-layer pattern (value-embedding slots, long and
short windows, the layer without attention, the U-net skips) is still exercised.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

BLOCK_SIZE = 128  # FlexAttention's mask block: windows and sequence lengths count in these.
EOT_ID = 50256  # GPT-2 `<|endoftext|>`; every document starts with it.
GPT2_VOCAB_SIZE = 50257

DTypePolicy = Literal["record", "fp32"]
AttentionBackend = Literal["auto", "dense", "blocked", "pallas", "mosaic"]  # auto: attention.resolve_backend
RematPolicy = Literal["none", "block", "block_dots"]
NSDType = Literal["bf16", "fp32"]
QKVLayout = Literal["merged", "separate"]


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
class ModelConfig:
    """The GPT of the record. Defaults are the 124M-class Sub3Min model.

    dtype_policy:
      "record": bf16 embeddings and activations, fp32 master weights cast to bf16 at use,
                FP8 lm_head in training (plain bf16 head in eval), soft-cap and CE in fp32.
      "fp32":   everything in fp32 and a plain fp32 head; for parity tests.
    """

    vocab_size: int = GPT2_VOCAB_SIZE
    num_layers: int = 12
    num_heads: int = 6
    model_dim: int = 768
    block_size: int = BLOCK_SIZE
    eot_id: int = EOT_ID
    attn_scale: float = 0.12  # fixed, not head_dim**-0.5
    logit_cap: float = 30.0  # logits -> cap * sigmoid(z / cap_temperature)
    logit_cap_temperature: float = 7.5
    rope_max_len: int = 65536
    mlp_ratio: int = 4
    # Per-layer patterns, written for the record's 12 layers (RECORD.md 2.3).
    value_embed_slots: tuple[int | None, ...] = (0, 1, 2, None, None, None, None, None, None, 0, 1, 2)
    long_window_layers: tuple[int, ...] = (0, 4, 11)
    attention_free_layers: tuple[int, ...] = (7,)
    dtype_policy: DTypePolicy = "record"
    attention_backend: AttentionBackend = "blocked"
    # Largest window (in blocks) the blocked attention must support; the window itself is a
    # traced value so that the window schedule never recompiles the step.
    max_window_blocks: int = 14
    # Cross-entropy over this many tokens at a time (None: all at once). Same mean either way.
    loss_chunk_tokens: int | None = None
    # FP8 head: gradients are multiplied by this before the e5m2 cast (the record's 2^29, sized
    # for a per-rank mean over 65,536 tokens; other means: fp8_grad_scale_for). Fewer than ~8.7k
    # tokens per mean with 2^29 can overflow e5m2 (max 57344; rounds to inf from 61440) at init.
    fp8_grad_scale: float = RECORD_FP8_GRAD_SCALE
    # Rematerialisation of each transformer block in the backward pass (same math, less memory):
    #   "none":       save whatever XLA keeps (all of a block's intermediates);
    #   "block":      save only each block's inputs, recompute the rest (jax.checkpoint);
    #   "block_dots": also save the block's matmul outputs (checkpoint_policies.dots_saveable).
    # Default "none": on XLA:CPU's plan "block" saves only ~10% (docs/BENCHMARKS.md, "Record
    # step memory"), not worth a second forward pass until measured on a GPU.
    remat: RematPolicy = "none"
    # Attention's input projection: "merged" is the record's one (3, D, D) `attn.qkv_w`;
    # "separate" holds `attn.q_w`, `attn.k_w`, `attn.v_w`, each (D, D), whose stack is the merged
    # weight (same numbers, three matmuls; for the fusion study, docs/FUSION.md).
    qkv_layout: QKVLayout = "merged"

    def __post_init__(self) -> None:
        for name in ("vocab_size", "num_layers", "num_heads", "model_dim", "block_size", "rope_max_len"):
            if getattr(self, name) <= 0:
                _fail(name, f"must be positive, got {getattr(self, name)}")
        if self.model_dim % self.num_heads:
            _fail("num_heads", f"model_dim {self.model_dim} is not divisible by num_heads {self.num_heads}")
        if self.head_dim % 4:
            _fail("num_heads", f"head_dim {self.head_dim} must be a multiple of 4 (half-truncated rotary)")
        if not 0 <= self.eot_id < self.vocab_size:
            _fail("eot_id", f"{self.eot_id} is outside the vocabulary of {self.vocab_size}")
        if self.num_layers % 2:
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

    @property
    def head_dim(self) -> int:
        return self.model_dim // self.num_heads

    @property
    def padded_vocab_size(self) -> int:
        """lm_head rows: the vocabulary padded to a multiple of 128 (50257 -> 50304)."""
        return next_multiple(self.vocab_size, 128)

    @property
    def num_value_embeds(self) -> int:
        return 1 + max((s for s in self.value_embed_slots if s is not None), default=-1)

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
class OptimConfig:
    """The record's optimizers (RECORD.md sections 5-7)."""

    muon_lr: float = 0.05
    muon_momentum_start: float = 0.85
    muon_momentum_end: float = 0.95
    muon_momentum_warmup_steps: int = 300
    ns_steps: int = 5
    # "bf16" as the record; "fp32" to check how much of a Muon mismatch is the bf16 NS.
    ns_dtype: NSDType = "bf16"
    head_lr: float = 0.008
    embed_lr: float = 0.6
    scalar_lr: float = 0.04
    adam_b1: float = 0.8
    adam_b2: float = 0.95
    adam_eps: float = 1e-10
    cooldown_frac: float = 0.4  # LR decays linearly over the last 40% of the steps ...
    final_lr_frac: float = 0.1  # ... down to 0.1x
    # The record keeps the embedding tables and their Adam moments in bf16.
    # None: follow the model's dtype policy (bf16 under "record", fp32 under "fp32").
    bf16_embeddings: bool | None = None

    def __post_init__(self) -> None:
        if not 0.0 <= self.cooldown_frac <= 1.0:
            _fail("cooldown_frac", f"must be in [0, 1], got {self.cooldown_frac}")
        _check_choice("ns_dtype", self.ns_dtype, NSDType)


@dataclass(frozen=True)
class TrainConfig:
    """One training run. `batch_tokens` is global; each device gets batch_tokens / devices
    tokens as batch_tokens / (devices * seq_len) packed sequences of `seq_len` tokens."""

    train_files: str = "data/fineweb10B/fineweb_train_*.bin"
    val_files: str = "data/fineweb10B/fineweb_val_*.bin"
    steps: int = 1393
    batch_tokens: int = 8 * 64 * 1024
    seq_len: int = 64 * 1024
    val_every: int = 125
    val_tokens: int = 10_485_760
    window_max_tokens: int = 1728  # window at step s: 1728 * s / steps, rounded up to blocks
    devices: int | None = None  # None: all visible devices
    seed: int = 0
    out_dir: str = "runs"
    checkpoint_every: int = 0  # 0: only at the end when --save-checkpoint
    keep_checkpoints: int = 3
    cycle_data: bool = False

    def __post_init__(self) -> None:
        if self.seq_len <= 0 or self.seq_len % BLOCK_SIZE:
            _fail("seq_len", f"must be a positive multiple of {BLOCK_SIZE}, got {self.seq_len}")
        if self.batch_tokens <= 0 or self.batch_tokens % self.seq_len:
            _fail("batch_tokens", f"{self.batch_tokens} is not a positive multiple of seq_len {self.seq_len}")
        if self.steps < 0:
            _fail("steps", f"must be >= 0, got {self.steps}")
        if self.val_every <= 0:
            _fail("val_every", f"must be positive, got {self.val_every}")
        if self.val_tokens < 0:
            _fail("val_tokens", f"must be >= 0, got {self.val_tokens}")

    @property
    def sequences_per_step(self) -> int:
        return self.batch_tokens // self.seq_len


@dataclass(frozen=True)
class Preset:
    model: ModelConfig = field(default_factory=ModelConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    train: TrainConfig = field(default_factory=TrainConfig)


def record_preset() -> Preset:
    """The Sub3Min record: 12 layers, 768 wide, 1393 steps of 524,288 tokens on 8 devices.

    The CE runs over 8192-token chunks: the same mean, without the (65536, 50304) fp32 logits
    and their gradient at once (-33 GB in XLA's plan, docs/BENCHMARKS.md "Record step memory").
    Attention "auto": the Pallas kernel on GPUs (9x `blocked` on an H100), `blocked` elsewhere.
    """
    return Preset(model=ModelConfig(loss_chunk_tokens=8192, attention_backend="auto"))


def tiny_preset() -> Preset:
    """A CPU-sized run on the built-in sample shards; keeps all 12 layers' patterns."""
    return Preset(
        model=ModelConfig(num_heads=2, model_dim=128, max_window_blocks=8),
        optim=OptimConfig(),
        train=TrainConfig(
            train_files="data/sample/sample_train_*.bin",
            val_files="data/sample/sample_val_*.bin",
            # Measured on 2 shared CPU cores: ~3 s per step (the 50304-wide head dominates),
            # ~40 s compile; 60 steps take the val loss from 10.83 to below 3 in ~4-5 minutes.
            steps=60,
            batch_tokens=2 * 1024,
            seq_len=1024,
            val_every=20,
            val_tokens=16 * 1024,
            window_max_tokens=1024,
        ),
    )


PRESETS = {"record": record_preset, "tiny": tiny_preset}


def get_preset(name: str) -> Preset:
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose one of {sorted(PRESETS)}")
    return PRESETS[name]()


# Frozen configs change by copy; dataclasses.replace runs __post_init__, so the copy is validated.
replace = dataclasses.replace


def config_to_json(preset: Preset) -> dict[str, Any]:
    """The preset as plain JSON data (tuples become lists), the form stored in checkpoints."""
    return json.loads(json.dumps(dataclasses.asdict(preset)))


def preset_from_json(data: dict[str, Any]) -> Preset:
    """Inverse of `config_to_json` (lists turn back into the tuples the dataclasses expect)."""

    def build(cls, values: dict[str, Any]):
        kwargs = {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}
        return cls(**kwargs)

    return Preset(
        model=build(ModelConfig, data["model"]),
        optim=build(OptimConfig, data["optim"]),
        train=build(TrainConfig, data["train"]),
    )
