"""torch_ref's own configuration: the record's hyperparameters (RECORD.md sections 1, 2, 5-8).

The record keeps its run settings in one `Hyperparameters` dataclass and its model sizes in the
`GPT(...)` call; torch_ref groups the same numbers as model / optimizer / run configs so that a
reader can hold them beside jaxgpt's. Nothing here is imported from jaxgpt: torch_ref stands
alone, and parity_tests/test_config_parity.py checks that both packages state the same values.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

BLOCK_SIZE = 128  # FlexAttention's block: masks, windows and sequence lengths count in these
EOT_ID = 50256  # GPT-2 <|endoftext|>, prepended to every document (RECORD.md 8.4)
VOCAB_SIZE = 50257  # GPT-2's vocabulary; the head pads it to a multiple of 128 (50304)
RECORD_FP8_GRAD_SCALE = 2.0**29  # the FP8 head's gradient scale, sized for that mean


def next_multiple(value: int, multiple: int) -> int:
    """Smallest multiple of `multiple` that is >= `value`."""
    return -(-value // multiple) * multiple


def _check(ok: bool, name: str, message: str) -> None:
    if not ok:
        raise ValueError(f"invalid config field `{name}`: {message}")


@dataclass(frozen=True)
class ModelConfig:
    """GPT(vocab_size=50257, num_layers=12, num_heads=6, model_dim=768) and its fixed patterns.

    dtype_policy "record": bf16 embeddings and activations, FP8 head in training; "fp32": all
    fp32 with a plain head (parity runs)."""

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

    def __post_init__(self) -> None:
        for name in ("vocab_size", "num_layers", "num_heads", "model_dim", "rope_max_len"):
            _check(getattr(self, name) > 0, name, f"must be positive, got {getattr(self, name)}")
        _check(self.model_dim % self.num_heads == 0, "num_heads", f"does not divide model_dim {self.model_dim}")
        _check(len(self.value_embed_slots) == self.num_layers, "value_embed_slots",
               f"has {len(self.value_embed_slots)} entries for {self.num_layers} layers")
        _check(self.dtype_policy in ("record", "fp32"), "dtype_policy", f"must be 'record' or 'fp32', got {self.dtype_policy!r}")
        _check(self.qkv_layout in ("merged", "separate"), "qkv_layout",
               f"must be 'merged' or 'separate', got {self.qkv_layout!r}")

    @property
    def head_dim(self) -> int:
        return self.model_dim // self.num_heads

    @property
    def padded_vocab_size(self) -> int:
        return next_multiple(self.vocab_size, 128)


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

    def __post_init__(self) -> None:
        _check(self.ns_dtype in ("bf16", "fp32"), "ns_dtype", f"must be 'bf16' or 'fp32', got {self.ns_dtype!r}")
        _check(0.0 <= self.cooldown_frac <= 1.0, "cooldown_frac", f"must be in [0, 1], got {self.cooldown_frac}")


@dataclass(frozen=True)
class TrainConfig:
    """The record's Hyperparameters: files, steps, batch and validation sizes (global tokens)."""

    train_files: str = "data/fineweb10B/fineweb_train_*.bin"
    val_files: str = "data/fineweb10B/fineweb_val_*.bin"
    steps: int = 1393
    batch_tokens: int = 8 * 64 * 1024
    seq_len: int = 64 * 1024
    val_every: int = 125
    val_tokens: int = 10_485_760
    window_max_tokens: int = 1728
    devices: int | None = None
    seed: int = 0
    out_dir: str = "runs"  # logs/ and checkpoints/<run id>/ go here
    checkpoint_every: int = 0  # 0: none during the run (--save-checkpoint PATH still writes the end)
    keep_checkpoints: int = 3  # the newest K step files of checkpoints/<run id>/ are kept
    cycle_data: bool = False

    def __post_init__(self) -> None:
        _check(self.seq_len > 0 and self.seq_len % BLOCK_SIZE == 0, "seq_len",
               f"must be a positive multiple of {BLOCK_SIZE}, got {self.seq_len}")
        _check(self.batch_tokens > 0 and self.batch_tokens % self.seq_len == 0, "batch_tokens",
               f"{self.batch_tokens} is not a positive multiple of seq_len {self.seq_len}")
        _check(self.steps >= 0, "steps", f"must be >= 0, got {self.steps}")
        _check(self.val_every > 0, "val_every", f"must be positive, got {self.val_every}")
        _check(self.val_tokens >= 0, "val_tokens", f"must be >= 0, got {self.val_tokens}")
        _check(self.checkpoint_every >= 0, "checkpoint_every", f"must be >= 0, got {self.checkpoint_every}")
        _check(self.keep_checkpoints >= 1, "keep_checkpoints", f"must be >= 1, got {self.keep_checkpoints}")


@dataclass(frozen=True)
class Preset:
    model: ModelConfig = field(default_factory=ModelConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    train: TrainConfig = field(default_factory=TrainConfig)


def record_preset() -> Preset:
    return Preset()


def tiny_preset() -> Preset:
    """The record's 12 layers and per-layer patterns at width 128 on the sample shards (CPU)."""
    return Preset(
        model=ModelConfig(num_heads=2, model_dim=128),
        train=TrainConfig(
            train_files="data/sample/sample_train_*.bin",
            val_files="data/sample/sample_val_*.bin",
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


replace = dataclasses.replace  # validated copies: __post_init__ runs on the copy
