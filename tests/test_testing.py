"""jaxgpt.testing: the synthetic data other tests build on has the structure they rely on."""

from __future__ import annotations

import numpy as np
import pytest

from jaxgpt import testing


def test_synthetic_tokens_are_documents_opened_by_eot():
    tokens = testing.synthetic_tokens(5_000, seed=0)
    assert tokens.shape == (5_000,) and tokens[0] == testing.SMALL_EOT
    starts = np.flatnonzero(tokens == testing.SMALL_EOT)
    assert 5_000 // 400 <= len(starts) <= 5_000 // 50 + 1  # documents of 50..399 tokens
    assert tokens[tokens != testing.SMALL_EOT].max() < testing.SMALL_EOT
    np.testing.assert_array_equal(tokens, testing.synthetic_tokens(5_000, seed=0))  # seeded


def test_document_layouts_put_eot_where_they_say():
    def starts(name: str) -> np.ndarray:
        tokens = testing.document_layout(name, 2048, vocab_size=1000, eot_id=999)
        assert tokens.dtype == np.int32 and tokens.shape == (2048,)
        return np.flatnonzero(tokens == 999)

    assert len(starts("one_doc")) == 0
    np.testing.assert_array_equal(starts("block_aligned"), [0, 384, 512, 573, 1152])
    assert starts("record_like")[0] == 0 and len(starts("many_short")) > 2048 // 75
    assert set(testing.DOCUMENT_LAYOUTS) == {"one_doc", "record_like", "block_aligned", "many_short"}
    with pytest.raises(ValueError, match="unknown document layout 'other'"):
        testing.document_layout("other", 128, vocab_size=1000, eot_id=999)


def test_small_model_config_keeps_the_record_patterns_and_takes_overrides():
    config = testing.small_model_config(model_dim=128)
    assert config.model_dim == 128 and config.num_layers == 4 and config.attention_free_layers == (2,)
    assert config.value_embed_slots[0] == config.value_embed_slots[-1] == 0
