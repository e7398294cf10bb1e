"""torch_ref.config: a bad value is refused naming its field, an unknown preset naming the choices.
That every field equals jaxgpt's is parity_tests/test_config_parity.py."""

from __future__ import annotations

import pytest

from torch_ref import config as cfg
from torch_ref import presets


@pytest.mark.parametrize("section, field, value", [
    ("train", "seq_len", 100), ("train", "keep_checkpoints", 0), ("train", "val_every", -1),
    ("train", "window_max_tokens", -1), ("model", "num_heads", 5),
    ("model", "dtype_policy", "fp16"), ("optim", "ns_dtype", "fp16"),
])
def test_config_validation_names_the_field(section, field, value):
    with pytest.raises(ValueError, match=f"invalid config field `{field}`"):
        cfg.replace(getattr(presets.record_preset(), section), **{field: value})


def test_val_every_0_is_the_records_only_at_the_end():
    assert cfg.replace(presets.record_preset().train, val_every=0).val_every == 0  # the record's val_loss_every 0


def test_unknown_preset_names_the_choices():
    with pytest.raises(ValueError, match="unknown preset 'huge'; choose one of") as refused:
        presets.get_preset("huge")
    assert all(repr(name) in str(refused.value) for name in presets.PRESETS)
