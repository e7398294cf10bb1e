"""torch_ref's named presets: each a whole run's configuration (`Preset`) built from the configs
of torch_ref.config, and the registry the command line's `--preset` reads (`PRESETS`,
`get_preset`): the record (alias `sub3min`), the CPU-sized `tiny` and `smoke` runs, and the
lineage's earlier records (docs/spec/LINEAGE.md sections 3-6) as switch values (`LINEAGE_PRESETS`).
Its own statement, as jaxgpt.presets is jaxgpt's; parity_tests/test_config_parity.py compares them.
"""

from __future__ import annotations

from typing import Any

from torch_ref.config import (
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


def smoke_preset() -> Preset:
    """The tiny run on the smallest model with each per-layer pattern once (4 layers x 64, one head)."""
    tiny = tiny_preset()
    return replace(tiny, model=replace(tiny.model, num_layers=4, num_heads=1, model_dim=64,
                                       value_embed_slots=(0, None, None, 0), long_window_layers=(0, 3),
                                       attention_free_layers=(2,)))


# --- The lineage: each record as switch values (LINEAGE.md sections 3-6) ---

_ALL_LAYERS = tuple(range(12))
_BEFORE_FP8: dict[str, Any] = dict(qkv_layout="separate", attn_scale=None)  # #8-#18: c_q/c_k/c_v, default scale
_BEFORE_FP8_LINEAGE: dict[str, Any] = dict(embed_rows="padded", linear_init="torch_default",
                                           fp8_head=False)  # #8-#18: GPT(vocab_size=50304), nn.Linear init
# #8/#9: 64 rows of 1024 per rank, the loader's quirks
_ROW_DATA: dict[str, Any] = dict(seq_len=1024, cycle_data=True, lineage=TrainLineage(
    repeat_first_batch=True, shard_switch="per_rank_inclusive", window_schedule="none"))


def _whole_steps_cooldown(steps: int, cooldown_steps: int) -> dict[str, Any]:
    return dict(cooldown_frac=cooldown_steps / steps, final_lr_frac=0.0)  # with OptimLineage(cooldown_whole_steps=True)


def untie_embed_preset() -> Preset:
    """#8 UntieEmbed: 4578 steps of 1024-token rows, plain causal attention, autocast."""
    return Preset(
        model=ModelConfig(**_BEFORE_FP8, dtype_policy="autocast", value_embed_slots=(None,) * 12,
                          attention_free_layers=(), long_window_layers=_ALL_LAYERS,
                          lineage=ModelLineage(**_BEFORE_FP8_LINEAGE, block_lambdas=False, unet_skips=False,
                                               attn_value_lambdas=False, attention_mask="causal", rotary="full",
                                               soft_cap="none")),
        optim=OptimConfig(muon_lr=0.02, muon_momentum_start=0.95, muon_momentum_end=0.95, muon_momentum_warmup_steps=0,
                          head_lr=0.002, embed_lr=0.3, scalar_lr=0.02, adam_b1=0.9, adam_b2=0.95, adam_eps=1e-8,
                          **_whole_steps_cooldown(4578, 1308),
                          lineage=OptimLineage(muon_momentum_form="sgd", ns_iteration="chain", cooldown_whole_steps=True)),
        train=TrainConfig(steps=4578, **_ROW_DATA),
    )


def shortcuts_preset() -> Preset:
    """#9 ShortcutsTweaks: #8 plus value residual, block lambdas, momentum warmup (500), tanh cap 30."""
    base = untie_embed_preset()
    return Preset(
        model=replace(base.model, logit_cap=30.0,
                      lineage=replace(base.model.lineage, block_lambdas=True, value_residual=True, soft_cap="tanh")),
        optim=replace(base.optim, muon_momentum_start=0.85, muon_momentum_warmup_steps=500,
                      **_whole_steps_cooldown(3200, 914)),
        train=replace(base.train, steps=3200),
    )


def unet_value_embeds_preset() -> Preset:
    """#15 UNetValueEmbedsTweaks: bf16 model, U-net, one (V, 6D) value table in mirrored chunks, token window."""
    return Preset(
        model=ModelConfig(**_BEFORE_FP8, dtype_policy="bf16_model", value_embed_slots=(0, 1, 2, 3, 4, 5, 5, 4, 3, 2, 1, 0),
                          attention_free_layers=(), long_window_layers=_ALL_LAYERS, logit_cap=30.0,
                          lineage=ModelLineage(**_BEFORE_FP8_LINEAGE, value_embed_layout="chunks",
                                               attention_mask="document_tokens", rotary="full_bf16_freq", soft_cap="tanh")),
        optim=OptimConfig(adam_eps=1e-8, **_whole_steps_cooldown(1480, 600), lineage=OptimLineage(cooldown_whole_steps=True)),
        train=TrainConfig(steps=1480, cycle_data=True, lineage=TrainLineage(shard_switch="per_rank", window_schedule="tokens")),
    )


def softcap_preset() -> Preset:
    """#18 SoftCap: three c_q/c_k/c_v, one block window (floor schedule), tanh cap 15, no FP8, eps 1e-8."""
    return Preset(
        model=ModelConfig(**_BEFORE_FP8, long_window_layers=_ALL_LAYERS, logit_cap=15.0,
                          lineage=ModelLineage(**_BEFORE_FP8_LINEAGE, soft_cap="tanh")),
        optim=OptimConfig(adam_eps=1e-8, final_lr_frac=0.0),
        train=TrainConfig(steps=1390, cycle_data=True, lineage=TrainLineage(window_schedule="blocks_floor")),
    )


LINEAGE_PRESETS = {
    "untie-embed": (8, "UntieEmbed", untie_embed_preset),
    "shortcuts": (9, "ShortcutsTweaks", shortcuts_preset),
    "unet-value-embeds": (15, "UNetValueEmbedsTweaks", unet_value_embeds_preset),
    "softcap": (18, "SoftCap", softcap_preset),
    "record": (20, "Sub3Min", record_preset),
}

PRESETS = {"record": record_preset, "tiny": tiny_preset, "smoke": smoke_preset, "sub3min": record_preset,
           **{name: build for name, (_, _, build) in LINEAGE_PRESETS.items()}}


def get_preset(name: str) -> Preset:
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose one of {sorted(PRESETS)}")
    return PRESETS[name]()
