"""jaxgpt.testing: the synthetic data other tests build on has the structure they rely on, and a
hung child process fails its test instead of hanging it."""

from __future__ import annotations

import os
import sys

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


def test_children_report_their_exit_codes_and_a_hung_one_is_killed_with_its_log(tmp_path):
    logs = [tmp_path / "a.log", tmp_path / "b.log"]
    quick = [sys.executable, "-c", "print('done'); raise SystemExit(3)"]
    children = testing.start_children([quick, quick], [dict(os.environ)] * 2, logs, tmp_path)
    assert testing.wait_children(children, logs, timeout_s=60) == [3, 3]
    assert logs[0].read_text() == "done\n"

    hung = [sys.executable, "-c", "import time; print('waiting', flush=True); time.sleep(600)"]
    children = testing.start_children([quick, hung], [dict(os.environ)] * 2, logs, tmp_path)
    with pytest.raises(AssertionError, match=r"(?s)rank 1 still running after 5 s:.*waiting"):
        testing.wait_children(children, logs, timeout_s=5, name="rank")
    assert all(child.poll() is not None for child in children)  # killed and reaped, not left running
