"""The named presets: each a whole run's configuration (`Preset`) built from the configs of
jaxgpt.config, and the registry the command line's `--preset` reads (`PRESETS`, `get_preset`).

`record` is the Sub3Min record (docs/spec/RECORD.md; alias `sub3min`); `tiny` shrinks its widths
and lengths so that the same code runs on a CPU with every per-layer pattern (value-embedding
slots, long and short windows, the layer without attention, the U-net skips), and `smoke` keeps
each once in 4 layers. The lineage's earlier records (docs/spec/LINEAGE.md: #8 UntieEmbed, #9
ShortcutsTweaks, #15 UNetValueEmbedsTweaks, #18 SoftCap) are each a set of switch values on top
of Sub3Min's configs (`LINEAGE_PRESETS`).
"""

from __future__ import annotations

from typing import Any

from jaxgpt.config import (
    ModelConfig,
    ModelLineage,
    OptimConfig,
    OptimLineage,
    Preset,
    TrainConfig,
    TrainLineage,
    replace,
)


def record_preset() -> Preset:
    """The Sub3Min record: 12 layers, 768 wide, 1393 steps of 524,288 tokens on 8 devices.

    The CE runs over 8192-token chunks: the same mean, without the (65536, 50304) fp32 logits
    and their gradient at once (-33 GB in XLA's plan, docs/BENCHMARKS.md "Record step memory").
    Attention "auto": the Pallas kernel on GPUs (9x `blocked` on an H100), `blocked` elsewhere.
    """
    return Preset(model=ModelConfig(loss_chunk_tokens=8192, attention_backend="auto"))


def tiny_preset() -> Preset:
    """A CPU-sized run on the built-in sample shards; keeps all 12 layers' patterns (the 50304-wide
    head dominates its step; its times and val loss: docs/TRAINING.md)."""
    return Preset(model=ModelConfig(num_heads=2, model_dim=128, max_window_blocks=8), train=TrainConfig(
        train_files="data/sample/sample_train_*.bin", val_files="data/sample/sample_val_*.bin", steps=60,
        batch_tokens=2 * 1024, seq_len=1024, val_every=20, val_tokens=16 * 1024, window_max_tokens=1024))


def smoke_preset() -> Preset:
    """The tiny preset's run on the smallest model that has each per-layer pattern once: 4 layers
    x 64, one head; a value-embedding slot shared by the first and last layer, long windows at
    both ends, the layer without attention, a 2 + 2 U-net; tiny's window cap of 8 blocks, the
    1024-token window its schedule ends at: smoke runs, dry runs, machinery tests (its times and
    val loss: docs/TRAINING.md, "Measurements")."""
    tiny = tiny_preset()
    return replace(tiny, model=replace(
        tiny.model, num_layers=4, num_heads=1, model_dim=64, value_embed_slots=(0, None, None, 0),
        long_window_layers=(0, 3), attention_free_layers=(2,)))


# The lineage (LINEAGE.md): each record as switch values on top of Sub3Min's configs.

_ALL_LAYERS = tuple(range(12))
_NO_VALUE_EMBEDS = (None,) * 12
# Model settings shared by #8-#18 (c_q/c_k/c_v, FlexAttention's or SDPA's default scale) and
# their lineage switches (GPT(vocab_size=50304), nn.Linear init, no FP8 head).
_BEFORE_FP8: dict[str, Any] = dict(qkv_layout="separate", attn_scale=None, loss_chunk_tokens=8192, attention_backend="auto")
_BEFORE_FP8_LINEAGE: dict[str, Any] = dict(embed_rows="padded", linear_init="torch_default", fp8_head=False)
_ROW_DATA: dict[str, Any] = dict(seq_len=1024, cycle_data=True, lineage=TrainLineage(
    repeat_first_batch=True, shard_switch="per_rank_inclusive", window_schedule="none"))


def _whole_steps_cooldown(steps: int, cooldown_steps: int) -> dict[str, Any]:
    """OptimConfig fields of a LR flat until steps - K, then (steps - s) / K down to 0 (with
    OptimLineage(cooldown_whole_steps=True))."""
    return dict(cooldown_frac=cooldown_steps / steps, final_lr_frac=0.0)


def untie_embed_preset() -> Preset:
    """#8 UntieEmbed (10.8 min, 4578 steps): untied head, embedding norm, zero head, two Adams;
    plain causal attention over 1024-token rows under autocast (LINEAGE.md section 3)."""
    return Preset(
        model=ModelConfig(
            **_BEFORE_FP8, dtype_policy="autocast", value_embed_slots=_NO_VALUE_EMBEDS, attention_free_layers=(),
            long_window_layers=_ALL_LAYERS,
            lineage=ModelLineage(**_BEFORE_FP8_LINEAGE, block_lambdas=False, unet_skips=False, attn_value_lambdas=False,
                                 attention_mask="causal", rotary="full", soft_cap="none"),
        ),
        optim=OptimConfig(
            muon_lr=0.02, muon_momentum_start=0.95, muon_momentum_end=0.95, muon_momentum_warmup_steps=0,
            head_lr=0.002, embed_lr=0.3, scalar_lr=0.02, adam_b1=0.9, adam_b2=0.95, adam_eps=1e-8,
            **_whole_steps_cooldown(4578, 1308),
            lineage=OptimLineage(muon_momentum_form="sgd", ns_iteration="chain", cooldown_whole_steps=True),
        ),
        train=TrainConfig(steps=4578, **_ROW_DATA),
    )


def shortcuts_preset() -> Preset:
    """#9 ShortcutsTweaks (8.2 min, 3200 steps): #8 plus the value residual, x0 shortcuts (block
    lambdas), Muon momentum warmup over 500 steps and a tanh soft-cap of 30 (LINEAGE.md section 4)."""
    base = untie_embed_preset()
    return Preset(
        model=replace(base.model, logit_cap=30.0,
                      lineage=replace(base.model.lineage, block_lambdas=True, value_residual=True, soft_cap="tanh")),
        optim=replace(base.optim, muon_momentum_start=0.85, muon_momentum_warmup_steps=500,
                      **_whole_steps_cooldown(3200, 914)),
        train=replace(base.train, steps=3200),
    )


def unet_value_embeds_preset() -> Preset:
    """#15 UNetValueEmbedsTweaks (3.95 min, 1480 steps): a bf16 model, U-net skips, one (V, 6D)
    value table in 6 mirrored chunks, FlexAttention with a token window (LINEAGE.md section 5)."""
    return Preset(
        model=ModelConfig(
            **_BEFORE_FP8, dtype_policy="bf16_model", value_embed_slots=(0, 1, 2, 3, 4, 5, 5, 4, 3, 2, 1, 0),
            attention_free_layers=(), long_window_layers=_ALL_LAYERS, logit_cap=30.0,
            lineage=ModelLineage(**_BEFORE_FP8_LINEAGE, value_embed_layout="chunks", attention_mask="document_tokens",
                                 rotary="full_bf16_freq", soft_cap="tanh"),
        ),
        optim=OptimConfig(adam_eps=1e-8, **_whole_steps_cooldown(1480, 600),
                          lineage=OptimLineage(cooldown_whole_steps=True)),
        train=TrainConfig(steps=1480, cycle_data=True, lineage=TrainLineage(shard_switch="per_rank", window_schedule="tokens")),
    )


def softcap_preset() -> Preset:
    """#18 SoftCap (3.4 min, 1390 steps): Sub3Min's architecture before merged QKV, long/short
    windows, scale 0.12 and FP8, with a tanh soft-cap of 15 and one block window (LINEAGE.md 6)."""
    return Preset(
        model=ModelConfig(**_BEFORE_FP8, long_window_layers=_ALL_LAYERS, logit_cap=15.0,
                          lineage=ModelLineage(**_BEFORE_FP8_LINEAGE, soft_cap="tanh")),
        optim=OptimConfig(adam_eps=1e-8, final_lr_frac=0.0),
        train=TrainConfig(steps=1390, cycle_data=True, lineage=TrainLineage(window_schedule="blocks_floor")),
    )


# Record number, name, and the preset of each record of the lineage, in order.
LINEAGE_PRESETS = {
    "untie-embed": (8, "UntieEmbed", untie_embed_preset),
    "shortcuts": (9, "ShortcutsTweaks", shortcuts_preset),
    "unet-value-embeds": (15, "UNetValueEmbedsTweaks", unet_value_embeds_preset),
    "softcap": (18, "SoftCap", softcap_preset),
    "record": (20, "Sub3Min", record_preset),
}
PRESET_ALIASES = {"sub3min": "record"}

PRESETS = {"record": record_preset, "tiny": tiny_preset, "smoke": smoke_preset, "sub3min": record_preset,
           **{name: build for name, (_, _, build) in LINEAGE_PRESETS.items()}}


def get_preset(name: str) -> Preset:
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose one of {sorted(PRESETS)}")
    return PRESETS[name]()
