"""jaxgpt.config's lineage switches: the presets hold LINEAGE.md's numbers, and mixes that
cannot mean anything are refused with a message naming both sides."""

from __future__ import annotations

import dataclasses
import math

import pytest

from jaxgpt import config as cfg
from jaxgpt import config_json, presets
from jaxgpt import params as params_lib

# LINEAGE.md's parameter totals (3.1, 4.1, 5.1, 6.1) and RECORD.md 2.1's.
PARAMETERS = {"untie-embed": 162_201_600, "shortcuts": 162_201_636, "unet-value-embeds": 394_002_486,
              "softcap": 275_742_772, "record": 275_598_388}


@pytest.mark.parametrize("name", sorted(PARAMETERS))
def test_each_preset_has_its_records_parameter_count(name):
    shapes = params_lib.param_shapes(presets.get_preset(name).model)
    total = sum(math.prod(s.shape) for s in shapes.values())
    assert total == PARAMETERS[name]


def test_presets_hold_the_records_run_lengths_and_aliases():
    steps = {name: presets.get_preset(name).train.steps for name in presets.LINEAGE_PRESETS}
    assert steps == {"untie-embed": 4578, "shortcuts": 3200, "unet-value-embeds": 1480, "softcap": 1390, "record": 1393}
    assert presets.get_preset("sub3min") == presets.get_preset("record")
    assert [number for number, _, _ in presets.LINEAGE_PRESETS.values()] == [8, 9, 15, 18, 20]
    row = presets.get_preset("untie-embed").train
    assert (row.seq_len, row.cycle_data) == (1024, True)
    assert (row.lineage.repeat_first_batch, row.lineage.shard_switch) == (True, "per_rank_inclusive")
    assert presets.get_preset("unet-value-embeds").train.lineage.shard_switch == "per_rank"
    assert presets.get_preset("softcap").train.lineage.shard_switch == "global"


def test_record_preset_keeps_every_switch_at_its_default():
    record = presets.get_preset("record")
    assert record.model.lineage == cfg.ModelLineage()
    assert record.model == cfg.replace(cfg.ModelConfig(), loss_chunk_tokens=8192, attention_backend="auto")
    assert record.optim == cfg.OptimConfig() and record.train == cfg.TrainConfig()


@pytest.mark.parametrize("changes, names", [
    (dict(value_residual=True), ("value_residual", "value embeddings")),
    (dict(value_residual=True, value_embed_slots=(None,) * 12), ("value_residual", "attn_value_lambdas")),
    (dict(attn_value_lambdas=False), ("value_embed_slots", "attn_value_lambdas")),
    (dict(attention_mask="causal"), ("long_window_layers", "causal")),
    (dict(attention_mask="document_tokens", long_window_layers=tuple(range(12)), attention_backend="pallas"),
     ("attention_backend", "document_tokens")),
])
def test_model_mixes_that_cannot_mean_anything_are_refused(changes, names):
    with pytest.raises(ValueError) as error:
        cfg.with_fields(cfg.ModelConfig(), **changes)
    for name in names:
        assert name in str(error.value)


def test_window_schedule_must_give_the_masks_window():
    with pytest.raises(ValueError, match="window_schedule.*'tokens'.*'document_blocks'"):
        cfg.Preset(train=cfg.with_fields(cfg.TrainConfig(), window_schedule="tokens"))
    with pytest.raises(ValueError, match="window_schedule.*'causal'"):
        base = presets.get_preset("untie-embed")
        cfg.replace(base, train=cfg.with_fields(base.train, window_schedule="blocks_ceil"))


def test_per_rank_shard_switch_needs_the_batch_to_split_over_the_ranks():
    with pytest.raises(ValueError, match="data_ranks"):
        cfg.TrainConfig(batch_tokens=1024, seq_len=1024, lineage=cfg.TrainLineage(shard_switch="per_rank", data_ranks=3))
    assert cfg.TrainConfig(batch_tokens=2048, seq_len=1024, lineage=cfg.TrainLineage(shard_switch="per_rank")).lineage.data_ranks == 8


def test_mixes_that_make_sense_run_through_validation():
    """Sub3Min without value embeddings, #18 with FP8, #9 without the value residual."""
    cfg.replace(cfg.ModelConfig(), value_embed_slots=(None,) * 12)
    cfg.with_fields(presets.get_preset("softcap").model, fp8_head=True)
    cfg.with_fields(presets.get_preset("shortcuts").model, value_residual=False)


SECTIONS = (("model", "ModelConfig", "ModelLineage"), ("optim", "OptimConfig", "OptimLineage"),
            ("train", "TrainConfig", "TrainLineage"))


def flat_form(saved: dict) -> dict:
    """A saved preset as written before each section had its `lineage`: the switches flat."""
    return {**saved, **{section: {**{k: v for k, v in saved[section].items() if k != "lineage"}, **saved[section]["lineage"]}
                        for section, _, _ in SECTIONS}}


def test_the_lineage_switches_live_in_their_own_objects_and_flat_names_route_there():
    """Each section's lineage switches are in its `lineage` object, at Sub3Min's values in the
    record preset; `with_fields` takes them flat (the CLI's form) beside the section's own
    fields, and a bad value names its switch."""
    record = presets.get_preset("record")
    for section, config_name, lineage_name in SECTIONS:
        config_class, lineage_class = getattr(cfg, config_name), getattr(cfg, lineage_name)
        assert getattr(record, section).lineage == lineage_class()
        assert not {f.name for f in dataclasses.fields(lineage_class)} & {f.name for f in dataclasses.fields(config_class)}
    model = cfg.with_fields(cfg.ModelConfig(), soft_cap="tanh", logit_cap=15.0, fp8_head=False)
    assert model.lineage == cfg.ModelLineage(soft_cap="tanh", fp8_head=False) and model.logit_cap == 15.0
    train = cfg.with_fields(cfg.TrainConfig(), steps=9, lineage=cfg.TrainLineage(data_ranks=4), window_schedule="blocks_floor")
    assert train.lineage == cfg.TrainLineage(data_ranks=4, window_schedule="blocks_floor") and train.steps == 9
    with pytest.raises(ValueError, match="`rotary`.*'half_truncated'"):
        cfg.ModelLineage(rotary="quarter")
    with pytest.raises(ValueError, match="`ns_iteration`"):
        cfg.with_fields(cfg.OptimConfig(), ns_iteration="loop")


@pytest.mark.parametrize("name", sorted(presets.LINEAGE_PRESETS))
def test_saved_configs_of_both_forms_read_back(name):
    """A checkpoint's config JSON reads back to its preset, in today's form (switches under each
    section's lineage) and in the form written before those objects existed (switches flat)."""
    preset = presets.get_preset(name)
    saved = config_json.config_to_json(preset)
    assert config_json.preset_from_json(saved) == preset
    assert config_json.preset_from_json(flat_form(saved)) == preset


def test_a_run_saved_with_flat_switches_resumes_under_both_frameworks(tmp_path):
    """A checkpoint written before the lineage objects (switches flat in its config) is the same
    run as today's config: neither framework's resume check lists a difference."""
    from jaxgpt.run import checkpoint as jax_checkpoint
    from torch_ref import presets as torch_presets
    from torch_ref.run import checkpoint as torch_checkpoint

    saved = config_json.config_to_json(presets.get_preset("shortcuts"))
    assert jax_checkpoint.config_differences(flat_form(saved), saved) == []
    assert "model.lineage.value_residual: True -> False" in jax_checkpoint.config_differences(
        flat_form(saved), config_json.config_to_json(presets.get_preset("softcap")))
    torch_saved = torch_checkpoint.config_dict(torch_presets.get_preset("shortcuts"))
    torch_checkpoint.refuse_config_change(flat_form(torch_saved), torch_saved, tmp_path / "old.pt")
    with pytest.raises(ValueError, match="train.lineage.shard_switch: 'per_rank_inclusive' -> 'global'"):
        torch_checkpoint.refuse_config_change(flat_form(torch_saved),
                                              torch_checkpoint.config_dict(torch_presets.get_preset("softcap")), tmp_path / "old.pt")


def test_a_saved_switch_of_the_wrong_kind_is_refused_where_it_lives_in_either_form():
    """The checkpoint reader checks each saved switch's JSON kind inside its section's lineage,
    and a flat switch of the older form where it now lives."""
    from jaxgpt.run import saved_state

    saved = config_json.config_to_json(presets.get_preset("softcap"))
    assert saved_state.saved_preset(saved, "ckpt") == presets.get_preset("softcap")
    saved["train"]["lineage"]["data_ranks"] = "8"
    with pytest.raises(ValueError, match=r"ckpt: .*config\.train\.lineage\.data_ranks is '8', not a number"):
        saved_state.saved_preset(saved, "ckpt")
    flat = flat_form(config_json.config_to_json(presets.get_preset("softcap")))
    flat["model"]["fp8_head"] = "no"
    with pytest.raises(ValueError, match=r"config\.model\.lineage\.fp8_head is 'no', not a bool"):
        saved_state.saved_preset(flat, "ckpt")
