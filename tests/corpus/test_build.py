"""Text to shards (RECORD.md 8.4) with an injected encoder, and scripts/make_shards.py."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from jaxgpt.corpus import build as corpus
from jaxgpt.corpus.build import encode_document, encode_documents, write_shards
from jaxgpt.corpus.tokenizer import ByteGPT2
from jaxgpt.shards import read_shard

E = 50256
REPO = Path(__file__).resolve().parents[2]


def letters(text: str) -> list[int]:
    """Tiny injected encoder: a=1, b=2, ..."""
    return [ord(c) - ord("a") + 1 for c in text]


def shard_contents(folder: Path) -> dict[str, list[int]]:
    """Shard name -> tokens, in shard-index order (by name, val_000000 would sort after train)."""
    return {p.name: read_shard(p).tolist() for p in sorted(folder.glob("*.bin"), key=lambda p: p.stem[-6:])}


def test_eot_is_prepended() -> None:
    assert encode_document("abc", letters).tolist() == [E, 1, 2, 3]
    assert encode_document("", letters).tolist() == [E]


def test_documents_split_across_shards_first_is_val(tmp_path: Path) -> None:
    docs = encode_documents(["ab", "cde", "f"], letters)  # E1 2 E3 4 5 E6 = 9 tokens
    paths = write_shards(docs, tmp_path, "toy", shard_size=4, progress=False)
    assert [p.name for p in paths] == ["toy_val_000000.bin", "toy_train_000001.bin", "toy_train_000002.bin"]
    assert shard_contents(tmp_path) == {
        "toy_val_000000.bin": [E, 1, 2, E],
        "toy_train_000001.bin": [3, 4, 5, E],
        "toy_train_000002.bin": [6],
    }


def test_exact_fill_and_document_longer_than_a_shard(tmp_path: Path) -> None:
    docs = encode_documents(["ab", "cdefghi"], letters)  # E1 2 | E3 4 | 5 6 7 | 8 9
    write_shards(docs, tmp_path, "toy", shard_size=3, progress=False)
    assert list(shard_contents(tmp_path).values()) == [[E, 1, 2], [E, 3, 4], [5, 6, 7], [8, 9]]


def test_separate_val_shard_size(tmp_path: Path) -> None:
    docs = encode_documents(["abcdefg"], letters)
    write_shards(docs, tmp_path, "toy", shard_size=3, val_shard_size=5, progress=False)
    assert list(shard_contents(tmp_path).values()) == [[E, 1, 2, 3, 4], [5, 6, 7]]


def test_ids_outside_uint16_are_rejected() -> None:
    with pytest.raises(ValueError, match="65536"):
        encode_document("x", lambda text: [70000])


def test_text_sources(tmp_path: Path) -> None:
    (tmp_path / "b.jsonl").write_text(json.dumps({"text": "second"}) + "\n\n" + json.dumps({"text": "third"}) + "\n")
    (tmp_path / "a.txt").write_text("first\nstill first")
    files = corpus.local_text_files(tmp_path)
    texts = [t for f in files for t in corpus.iter_text_file_documents(f)]
    assert texts == ["first\nstill first", "second", "third"]
    (tmp_path / "bad.jsonl").write_text(json.dumps({"body": "x"}) + "\n")
    with pytest.raises(ValueError, match="bad.jsonl:1: no string field 'text'"):
        list(corpus.iter_text_file_documents(tmp_path / "bad.jsonl"))
    with pytest.raises(FileNotFoundError, match="nope"):
        corpus.local_text_files(tmp_path / "nope")


def test_missing_datasets_package_is_explained(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "datasets", None)  # makes `import datasets` fail
    with pytest.raises(RuntimeError, match="pip install datasets"):
        next(corpus.iter_hf_documents("someone/some-dataset"))


def test_cli_with_pool_matches_in_process(tmp_path: Path) -> None:
    source = tmp_path / "texts"
    source.mkdir()
    for i in range(40):
        (source / f"doc{i:02d}.txt").write_text(f"document {i} " + "é" * i)
    out = tmp_path / "out"
    command = [sys.executable, str(REPO / "scripts/make_shards.py"), str(source), "--out", str(out)]
    command += ["--prefix", "p", "-s", "300", "--workers", "2", "--encoding", "gpt2-bytes"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    expected_dir = tmp_path / "expected"
    texts = [(source / f"doc{i:02d}.txt").read_text() for i in range(40)]
    write_shards(encode_documents(texts, ByteGPT2()), expected_dir, "p", 300, progress=False)
    assert shard_contents(out) == shard_contents(expected_dir)
    assert "p_val_000000.bin" in shard_contents(out)


def test_cli_reports_bad_source(tmp_path: Path) -> None:
    command = [sys.executable, str(REPO / "scripts/make_shards.py"), str(tmp_path / "x.csv"), "--out", str(tmp_path)]
    (tmp_path / "x.csv").write_text("a,b")
    result = subprocess.run(command + ["--encoding", "gpt2-bytes"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 1 and "expected a .txt or .jsonl file" in result.stderr


# ---------------------------------------------------------------------------- download_fineweb (offline)


def test_download_skips_present_files(tmp_path: Path) -> None:
    (tmp_path / "fineweb_val_000000.bin").write_bytes(b"x")
    (tmp_path / "fineweb_train_000002.bin").write_bytes(b"x")
    fetched: list[str] = []
    names = corpus.download_fineweb(tmp_path, 3, download=lambda name, out: fetched.append(name))
    assert names == fetched == ["fineweb_train_000001.bin", "fineweb_train_000003.bin"]
    assert corpus.fineweb_filenames(8)[-1] == "fineweb_train_000008.bin" and len(corpus.fineweb_filenames(8)) == 9


def test_download_explains_missing_module_and_network(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)
    with pytest.raises(RuntimeError, match="pip install huggingface_hub"):
        corpus.download_fineweb(tmp_path, 1)
    from scripts import download_fineweb as command

    assert command.main(["--out", str(tmp_path), "--num-shards", "1"]) == 1

    def offline(name: str, out: Path) -> None:
        raise ConnectionError("no route to host")

    with pytest.raises(RuntimeError, match="fineweb_val_000000.bin from the Hugging Face dataset kjj0/fineweb10B-gpt2"):
        corpus.download_fineweb(tmp_path, 1, download=offline)


def test_cli_gpt2_bpe_offline_end_to_end(tmp_path: Path) -> None:
    # The whole make_shards path with real GPT-2 BPE: an empty tiktoken cache and no proxy,
    # so the ids can only come from the packaged files.
    source = tmp_path / "texts.jsonl"
    source.write_text("\n".join(json.dumps({"text": t}) for t in ["Hello world", "<|endoftext|> is text here"]) + "\n")
    out = tmp_path / "out"
    env = {**os.environ, "TIKTOKEN_CACHE_DIR": str(tmp_path / "empty-cache"), "https_proxy": "http://127.0.0.1:9"}
    command = [sys.executable, str(REPO / "scripts/make_shards.py"), str(source), "--out", str(out), "--prefix", "p"]
    result = subprocess.run(command + ["-s", "4", "--workers", "1"], capture_output=True, text=True, timeout=120, env=env)
    assert result.returncode == 0, result.stderr
    tokens = [t for shard in shard_contents(out).values() for t in shard]
    hello, special = [15496, 995], [27, 91, 437, 1659, 5239, 91, 29]  # "<|endoftext|>" as plain text
    assert tokens[:3] == [E] + hello and tokens[3] == E and tokens[4:11] == special
    assert tokens.count(E) == 2  # only the two document-opening EOTs are special
    meta = json.loads((out / "meta.json").read_text())
    assert meta["encoding"] == "gpt2" and meta["encoding_files"] == "package"
    assert sum(meta["shards"].values()) == len(tokens) and meta["source"] == str(source)


def test_shard_meta_records_each_shards_sha256_and_one_over_all(tmp_path: Path) -> None:
    """Each shard's SHA-256 (what a run checks before reading it: runkit.preflight) beside the
    one over every shard's name and bytes in order (what older meta.json files hold alone)."""
    documents = [encode_document(text, ByteGPT2()) for text in ["first document", "second one, longer"]]
    paths = write_shards(documents, tmp_path, "m", 8, progress=False)
    meta = corpus.shard_meta(paths, ByteGPT2())
    assert list(meta["shard_sha256"]) == [path.name for path in paths] == list(meta["shards"])
    assert meta["shard_sha256"] == {path.name: hashlib.sha256(path.read_bytes()).hexdigest() for path in paths}
    together = hashlib.sha256(b"".join(path.name.encode() + path.read_bytes() for path in paths)).hexdigest()
    assert meta["sha256"] == together
