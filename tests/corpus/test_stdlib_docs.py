"""The built-in sample corpus: deterministic, record-format, GPT-2 ids, idempotent."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from jaxgpt.config import EOT_ID
from jaxgpt.corpus import stdlib_docs as sample_data
from jaxgpt.corpus.tokenizer import GPT2BPE, ByteGPT2, gpt2_byte_token_ids
from jaxgpt.data import BatchLoader
from jaxgpt.shards import read_shard

SUBSET = 12  # modules; enough text for a val shard and two train shards at the sizes below


def build_subset(out: Path) -> dict:
    return sample_data.build_sample_data(
        out, limit_modules=SUBSET, val_shard_tokens=4096, train_shard_tokens=16384, encoder=ByteGPT2()
    )


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """One subset build shared by the tests that only read it."""
    out = tmp_path_factory.mktemp("sample")
    return out, build_subset(out)


def test_subset_build_is_deterministic(tmp_path: Path) -> None:
    first, second = build_subset(tmp_path / "a"), build_subset(tmp_path / "b")
    assert first == second
    names = sorted(first["shards"])
    assert names[-1] == "sample_val_000000.bin" and names[0] == "sample_train_000001.bin"
    assert first["shards"]["sample_val_000000.bin"] == 4096 and first["train_tokens"] > 16384
    for name in names:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_shards_hold_eot_prefixed_documentation(built: tuple[Path, dict]) -> None:
    tmp_path, meta = built
    assert meta["encoding"] == "gpt2-bytes" and meta["num_documents"] > 1
    val = np.asarray(read_shard(tmp_path / "sample_val_000000.bin"))
    assert val[0] == EOT_ID  # the first document opens the first shard
    byte_of_id = np.argsort(gpt2_byte_token_ids())
    first_document = val[1:][:2000]  # the first module's text (cut well before any later EOT)
    first_document = first_document[: np.argmax(first_document == EOT_ID) or None]
    text = bytes(byte_of_id[first_document].astype(np.uint8)).decode("utf-8", errors="replace")
    first_module = sample_data.stdlib_module_sources(SUBSET)[0][0]
    assert text.startswith(f"Module {first_module}")
    assert set(np.unique(val).tolist()) <= set(range(256)) | {EOT_ID}  # byte tokens and EOT only


def test_build_is_idempotent_and_marks_completion_last(
    built: tuple[Path, dict], monkeypatch: pytest.MonkeyPatch
) -> None:
    tmp_path, meta = built
    assert (tmp_path / ".complete").is_file()
    assert json.loads((tmp_path / "meta.json").read_text()) == meta

    def must_not_run(*args, **kwargs):
        raise AssertionError("rebuilt although .complete exists")

    monkeypatch.setattr(sample_data, "sample_texts", must_not_run)
    assert sample_data.build_sample_data(tmp_path, encoder=ByteGPT2()) == meta


def test_default_build_is_gpt2_bpe_and_replaces_a_byte_build(built: tuple[Path, dict], tmp_path: Path) -> None:
    shutil.copytree(built[0], tmp_path, dirs_exist_ok=True)  # a complete build in byte tokens
    assert not sample_data.is_up_to_date(tmp_path)
    meta = sample_data.build_sample_data(tmp_path, limit_modules=SUBSET, val_shard_tokens=1024, train_shard_tokens=4096)
    assert meta["encoding"] == "gpt2" and sample_data.is_up_to_date(tmp_path)
    val = read_shard(tmp_path / "sample_val_000000.bin")
    first_module = sample_data.stdlib_module_sources(SUBSET)[0][0]
    assert val[0] == EOT_ID and GPT2BPE().decode(val[1:20]).startswith(f"Module {first_module}")
    assert meta["train_tokens"] < built[1]["train_tokens"] / 2  # BPE: several bytes per token


def test_interrupted_build_is_redone(built: tuple[Path, dict], tmp_path: Path) -> None:
    shutil.copytree(built[0], tmp_path, dirs_exist_ok=True)
    (tmp_path / ".complete").unlink()
    # A shard number past the last one the build writes (how many depends on the Python version's
    # stdlib docs): the rebuild must remove it, leaving exactly the shards its meta lists.
    stale = tmp_path / f"sample_train_{len(built[1]['shards']) + 1:06d}.bin"
    stale.write_bytes(b"stale")
    meta = build_subset(tmp_path)
    assert not stale.exists()
    assert sorted(path.name for path in tmp_path.glob("sample_*.bin")) == sorted(meta["shards"])


def test_a_failed_rebuild_leaves_the_complete_folder_as_it_was(built: tuple[Path, dict], tmp_path: Path) -> None:
    shutil.copytree(built[0], tmp_path / "sample")
    before = {path.name: path.read_bytes() for path in (tmp_path / "sample").iterdir()}

    def failing_encoder(text: str):
        raise OSError("disk gone")

    with pytest.raises(OSError, match="disk gone"):
        sample_data.build_sample_data(tmp_path / "sample", limit_modules=SUBSET, encoder=failing_encoder, force=True)
    assert {path.name: path.read_bytes() for path in (tmp_path / "sample").iterdir()} == before
    assert sorted(path.name for path in tmp_path.iterdir()) == ["sample"]  # no staging folder left


def test_module_document_renders_docstrings_and_signatures() -> None:
    source = '"""Top."""\nclass A(B):\n    """Doc A."""\n    def f(self, x=1):\n        """Doc f."""\n\ndef _g():\n    pass\n'
    assert sample_data.module_document("m", source) == (
        "Module m\n\nTop.\n\nclass A(B)\n    Doc A.\n\n    def f(self, x=1)\n        Doc f.\n"
    )
    assert sample_data.module_document("m", "x = 1\n") is None


def test_module_list_excludes_tests_and_is_sorted() -> None:
    names = [name for name, _ in sample_data.stdlib_module_sources()]
    assert names == sorted(names) and "json" in names and "json.decoder" in names
    assert not any(part in ("test", "tests", "idle_test") for name in names for part in name.split("."))


def test_subset_loads_with_the_tiny_geometry(built: tuple[Path, dict]) -> None:
    tmp_path = built[0]
    with BatchLoader(str(tmp_path / "sample_train_*.bin"), 2048, 1024) as loader:
        inputs, targets = next(loader)
    first_train = read_shard(tmp_path / "sample_train_000001.bin")
    assert inputs.shape == (2, 1024)
    np.testing.assert_array_equal(inputs.reshape(-1), first_train[:2048])
