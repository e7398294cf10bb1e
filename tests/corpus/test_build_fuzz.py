"""Fuzzed: `meta.json` of a shard folder through its readers (jaxgpt.corpus.build.read_meta, the
sampler's tokenizer choice jaxgpt.corpus.tokenizer.tokenizer_from_meta, the sample corpus check
jaxgpt.corpus.stdlib_docs.is_up_to_date): a valid meta.json damaged (tests.fuzzing.damaged), random
JSON values, and valid objects whose fields hold anything.

Property: a UTF-8 JSON object reads as exactly that object; the tokenizer is the one its
"encoding" names when that is a known name; anything else is refused with one ValueError line
naming the file; nothing else is raised.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jaxgpt.corpus import build as corpus
from jaxgpt.corpus import stdlib_docs as sample_data
from jaxgpt.corpus import tokenizer
from tests import fuzzing

pytestmark = pytest.mark.fuzz
VALID = {"encoding": "gpt2-bytes", "encoding_files": None, "val_tokens": 4096, "train_tokens": 20480,
         "shards": {"sample_val_000000.bin": 4096, "sample_train_000001.bin": 20480}, "sha256": "0" * 64}
KNOWN = {"gpt2", "gpt2-bytes", "gpt2-tiktoken"}
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12)
FIELDS = st.builds(lambda name, value: {**VALID, name: value}, st.sampled_from(sorted(VALID)), JSON_VALUES)
RAW = st.one_of(
    fuzzing.damaged(json.dumps(VALID, indent=2).encode()),
    JSON_VALUES.map(lambda value: json.dumps(value).encode()),
    FIELDS.map(lambda meta: json.dumps(meta).encode()),
    st.sampled_from([b"[" * 100_000, b'{"encoding": ' + b"9" * 5000 + b"}", b"\xff\xfe{}", b'{"encoding": "gpt2-by']),
)


def expected_meta(raw: bytes) -> dict | None:
    try:
        meta = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError):
        return None
    return meta if isinstance(meta, dict) else None


def known_encoding(meta: dict | None) -> bool:
    return meta is not None and isinstance(meta.get("encoding"), str) and meta["encoding"] in KNOWN


def refused_naming(error: BaseException, path) -> None:
    assert isinstance(error, ValueError), f"{type(error).__name__}: {error}"
    assert fuzzing.names_file(error, path) and "\n" not in str(error), error


@settings(max_examples=fuzzing.examples(150))
@given(raw=RAW)
def test_meta_json_readers_on_damaged_and_random_json(tmp_path, raw):
    path = tmp_path / corpus.META_FILE
    path.write_bytes(raw)
    (tmp_path / sample_data.COMPLETE_MARKER).write_text("")
    expected = expected_meta(raw)
    with fuzzing.guarded():
        try:
            assert corpus.read_meta(path) == expected
        except Exception as error:  # noqa: BLE001 - the property: ValueError naming the file, nothing else
            assert expected is None, f"a JSON object was refused: {error}"
            refused_naming(error, path)
        try:
            chosen = tokenizer.tokenizer_from_meta(path)
            assert known_encoding(expected)
            assert chosen.name in (expected["encoding"], "gpt2")
        except Exception as error:  # noqa: BLE001
            assert not known_encoding(expected), f"a known encoding was refused: {error}"
            refused_naming(error, path)
        try:
            assert isinstance(sample_data.is_up_to_date(tmp_path), bool) and expected is not None
        except Exception as error:  # noqa: BLE001
            assert expected is None
            refused_naming(error, path)
