"""Text to record-format shards, as the record's `data/fineweb.py` did (RECORD.md 8.4).

Each document becomes [EOT] + encode(text): the `<|endoftext|>` token 50256 is PREPENDED, so
it marks document starts. Shards are filled in document order with exactly `shard_size`
tokens; a document that does not fit is split and its remainder opens the next shard; the
last shard holds what is left. Shard 0 is named `val`, later ones `train`:
`<prefix>_val_000000.bin`, `<prefix>_train_000001.bin`, ...

Encoders are plain callables `str -> list[int]` so tests can inject a tiny one; the GPT-2
tokenizers (BPE from local files, or byte tokens) are in `jaxgpt.corpus.tokenizer`.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import multiprocessing
import os
import shutil
import uuid
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import numpy as np
from tqdm import tqdm

from jaxgpt.config import EOT_ID
from jaxgpt.shards import COMPLETE_MARKER, META_FILE, read_shard_header, write_shard  # read by the loader

Encoder = Callable[[str], "list[int] | np.ndarray"]
DEFAULT_SHARD_SIZE = 10**8

# --------------------------------------------------------------------------------------
# Documents to tokens to shards


def encode_document(text: str, encode: Encoder, eot_id: int = EOT_ID) -> np.ndarray:
    """(1 + n,) uint16: [eot_id] + encode(text). Raises ValueError for ids outside uint16."""
    ids = np.asarray(encode(text), dtype=np.int64).reshape(-1)
    tokens = np.concatenate([np.array([eot_id], dtype=np.int64), ids])
    if tokens.size and (tokens.min() < 0 or tokens.max() >= 2**16):
        raise ValueError(f"token ids must lie in [0, 65536) for uint16 shards; got [{tokens.min()}, {tokens.max()}]")
    return tokens.astype(np.uint16)


def encode_documents(
    texts: Iterable[str], encode: Encoder, *, num_workers: int = 1, chunksize: int = 16
) -> Iterator[np.ndarray]:
    """Encoded documents in input order; with num_workers > 1 through a process pool's ordered
    imap (`encode` must then be picklable, e.g. a module-level function or a jaxgpt.corpus.tokenizer one)."""
    work = functools.partial(encode_document, encode=encode)
    if num_workers <= 1:
        yield from map(work, texts)
        return
    with multiprocessing.Pool(num_workers) as pool:
        yield from pool.imap(work, texts, chunksize=chunksize)


def shard_path(out_dir: str | os.PathLike, prefix: str, index: int) -> Path:
    split = "val" if index == 0 else "train"
    return Path(out_dir) / f"{prefix}_{split}_{index:06d}.bin"


def _write_next(buffer: np.ndarray, filled: int, out_dir, prefix: str, index: int) -> Path:
    path = shard_path(out_dir, prefix, index)
    write_shard(path, buffer[:filled])
    return path


def write_shards(
    documents: Iterable[np.ndarray],
    out_dir: str | os.PathLike,
    prefix: str,
    shard_size: int = DEFAULT_SHARD_SIZE,
    *,
    val_shard_size: int | None = None,
    progress: bool = True,
) -> list[Path]:
    """Pack token documents into shards of exactly `shard_size` tokens (the first, val, shard
    of `val_shard_size` if given), splitting documents across shard boundaries; the last
    shard holds the rest. Returns the written paths in order."""
    sizes = [shard_size if val_shard_size is None else val_shard_size, shard_size]
    if min(sizes) <= 0:
        raise ValueError(f"shard sizes must be positive, got shard_size={shard_size}, val_shard_size={val_shard_size}")
    written: list[Path] = []
    buffer = np.empty(sizes[0], dtype=np.uint16)
    filled = 0
    bar = None  # one progress bar per shard, opened when its first token arrives

    for tokens in documents:
        while len(tokens):
            if bar is None:
                bar = tqdm(total=len(buffer), unit="tok", desc=f"shard {len(written)}", disable=not progress)
            take = min(len(tokens), len(buffer) - filled)
            buffer[filled : filled + take] = tokens[:take]
            filled += take
            bar.update(take)
            tokens = tokens[take:]
            if filled == len(buffer):
                written.append(_write_next(buffer, filled, out_dir, prefix, len(written)))
                bar.close()
                buffer, filled, bar = np.empty(sizes[1], dtype=np.uint16), 0, None
    if filled:
        written.append(_write_next(buffer, filled, out_dir, prefix, len(written)))
    if bar is not None:
        bar.close()
    return written


def read_meta(path: str | os.PathLike) -> dict:
    """A shard folder's meta.json as a dict; ValueError naming the file when it is not a JSON
    object (a truncated write, other bytes, a number too long to read, nesting too deep) and
    FileNotFoundError when it is missing."""
    remedy = "rebuild the shard folder or restore this file"
    try:
        meta = json.loads(Path(path).read_bytes().decode("utf-8"))
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}: not valid JSON ({error.msg} at line {error.lineno}); {remedy}") from None
    except (ValueError, RecursionError) as error:  # not UTF-8; an integer beyond Python's digit limit
        raise ValueError(f"{path}: not valid JSON ({type(error).__name__}: {str(error)[:100]}); {remedy}") from None
    if not isinstance(meta, dict):
        raise ValueError(f"{path}: not a JSON object (a {type(meta).__name__}); {remedy}")
    return meta


def shard_meta(paths: list[Path], encoder: Encoder) -> dict:
    """What a shard folder's meta.json records about its shards: the encoding (its `name`,
    e.g. "gpt2" or "gpt2-bytes", which `jaxgpt.corpus.tokenizer.tokenizer_for` turns back into a
    tokenizer), where its files came from, token counts per shard, the SHA-256 of each shard
    (checked before a run reads it: runkit.preflight.check_shard_digests) and one SHA-256 over
    the shards' names and bytes in order (what an older meta.json holds alone)."""
    counts = {path.name: int(read_shard_header(path)) for path in paths}
    digest, each = hashlib.sha256(), {}
    for path in paths:
        digest.update(path.name.encode())
        own = hashlib.sha256()
        with open(path, "rb") as file:
            while chunk := file.read(1 << 20):
                digest.update(chunk)
                own.update(chunk)
        each[path.name] = own.hexdigest()
    return {
        "encoding": getattr(encoder, "name", repr(encoder)),
        "encoding_files": getattr(encoder, "source", None),
        "val_tokens": sum(n for name, n in counts.items() if "_val_" in name),
        "train_tokens": sum(n for name, n in counts.items() if "_train_" in name),
        "shards": counts,
        "sha256": digest.hexdigest(),
        "shard_sha256": each,
    }


# --------------------------------------------------------------------------------------
# Text sources


def iter_text_file_documents(path: str | os.PathLike, text_field: str = "text") -> Iterator[str]:
    """Documents of one file: a .txt file is one document; a .jsonl file gives the
    `text_field` of each non-empty line."""
    path = Path(path)
    if path.suffix == ".txt":
        yield path.read_text(encoding="utf-8")
    elif path.suffix == ".jsonl":
        with path.open(encoding="utf-8") as f:
            for line_number, line in enumerate(f, 1):
                if not line.strip():
                    continue
                record = json.loads(line)
                if not isinstance(record, dict) or not isinstance(record.get(text_field), str):
                    raise ValueError(f"{path}:{line_number}: no string field {text_field!r}")
                yield record[text_field]
    else:
        raise ValueError(f"{path}: expected a .txt or .jsonl file")


def local_text_files(source: str | os.PathLike) -> list[Path]:
    """A .txt/.jsonl file, or every such file under a folder (recursively, sorted)."""
    source = Path(source)
    if source.is_dir():
        files = sorted(p for p in source.rglob("*") if p.suffix in (".txt", ".jsonl") and p.is_file())
        if not files:
            raise ValueError(f"{source}: folder holds no .txt or .jsonl files")
        return files
    if not source.is_file():
        raise FileNotFoundError(f"no such file or folder: {source}")
    if source.suffix not in (".txt", ".jsonl"):
        raise ValueError(f"{source}: expected a .txt or .jsonl file or a folder of them")
    return [source]


def iter_hf_documents(
    name: str, *, config: str | None = None, split: str = "train", text_field: str = "text", streaming: bool = False
) -> Iterator[str]:
    """Documents of a Hugging Face dataset in dataset order (the record used
    HuggingFaceFW/fineweb, config sample-10BT, split train). Needs `datasets` and network."""
    try:
        from datasets import load_dataset
    except ImportError as error:
        raise RuntimeError(
            f"{name!r} is not a local file or folder, and reading it as a Hugging Face dataset needs the "
            "`datasets` package: pip install datasets (or pip install -e '.[data]')"
        ) from error
    try:
        dataset = load_dataset(name, name=config, split=split, streaming=streaming)
    except Exception as error:
        raise RuntimeError(f"could not load Hugging Face dataset {name!r} (config {config}, split {split}): {error}") from error
    for record in dataset:
        yield record[text_field]


# --------------------------------------------------------------------------------------
# A whole shard folder (scripts/make_shards.py)


def build_shards(source: str, out: str | os.PathLike, encoder: Encoder, *, prefix: str = "shard",
                 shard_size: int = DEFAULT_SHARD_SIZE, workers: int = 1, text_field: str = "text",
                 hf_config: str | None = None, split: str = "train", streaming: bool = False,
                 overwrite: bool = False) -> list[Path]:
    """Shards of `source` (a .txt/.jsonl file, a folder of them, or a Hugging Face dataset name)
    in `out`, with meta.json and the completion marker. Everything is written into a staging
    folder beside `out` and moved in when complete, so a crash never leaves a partial set that
    looks finished. ValueError when `out` already holds shards and not `overwrite` (the loader
    would mix them), or for a file that is not UTF-8; RuntimeError, FileNotFoundError from the
    source."""
    out = Path(out)
    existing = sorted(out.glob("*.bin")) if out.is_dir() else []
    if existing and not overwrite:
        raise ValueError(f"{out} already holds {len(existing)} shard file(s) (e.g. {existing[0].name}); the loader "
                         "would mix them with the new ones: pass --overwrite to replace them, or choose another --out")
    with staged_shard_folder(out, existing) as staging:
        texts: Iterator[str]
        if Path(source).exists():
            texts = (text for path in local_text_files(source) for text in _documents_naming_the_file(path, text_field))
        else:
            texts = iter_hf_documents(source, config=hf_config, split=split, text_field=text_field, streaming=streaming)
        paths = write_shards(encode_documents(texts, encoder, num_workers=workers), staging, prefix, shard_size)
        # Says which tokenizer decodes these shards (python -m jaxgpt.sample reads it).
        meta = {"source": source, **shard_meta(paths, encoder)}
        (staging / META_FILE).write_text(json.dumps(meta, indent=2) + "\n")
    return [out / path.name for path in paths]


def _documents_naming_the_file(path: Path, text_field: str) -> Iterator[str]:
    try:
        yield from iter_text_file_documents(path, text_field)
    except UnicodeDecodeError as error:
        raise ValueError(f"{path}: not UTF-8 text ({error.reason} at byte {error.start})") from None


@contextlib.contextmanager
def staged_shard_folder(out: Path, old_shards: list[Path]) -> Iterator[Path]:
    """A staging folder beside `out` for a build's shards and meta.json. When the block completes,
    its files replace `old_shards` (and the marker and meta.json) in `out`, the completion marker
    written last; when it raises, `out` is left as it was. The staging folder is removed either way."""
    staging = out.parent / f".{out.name}.tmp-{uuid.uuid4().hex[:8]}"
    staging.mkdir(parents=True)
    try:
        yield staging
        _move_into_place(staging, out, old_shards)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _move_into_place(staging: Path, out: Path, old_shards: list[Path]) -> None:
    """Replace `old_shards` (and the marker, meta.json) in `out` by the staged files; the
    completion marker is written last."""
    out.mkdir(parents=True, exist_ok=True)
    (out / COMPLETE_MARKER).unlink(missing_ok=True)
    for path in old_shards:
        path.unlink()
    for path in sorted(staging.iterdir()):
        os.replace(path, out / path.name)
    (out / COMPLETE_MARKER).write_text("")


# --------------------------------------------------------------------------------------
# The record's own shards, already tokenized (scripts/download_fineweb.py)

FINEWEB_REPO_ID = "kjj0/fineweb10B-gpt2"  # the record's tokenized FineWeb (RECORD.md 8.5)
DEFAULT_FINEWEB_SHARDS = 8  # the record's 1393 steps of 524,288 tokens read train shards 1..8


def fineweb_filenames(num_shards: int) -> list[str]:
    """The val shard, then train shards 1..num_shards."""
    if num_shards < 0:
        raise ValueError(f"--num-shards must be >= 0, got {num_shards}")
    return ["fineweb_val_000000.bin"] + [f"fineweb_train_{i:06d}.bin" for i in range(1, num_shards + 1)]


def missing_files(out_dir: str | Path, names: list[str]) -> list[str]:
    """Names not yet present in out_dir (a present file is trusted, as in the record)."""
    return [name for name in names if not (Path(out_dir) / name).is_file()]


def hf_downloader() -> Callable[[str, Path], None]:
    """A function (file name, folder) -> None fetching one file from FINEWEB_REPO_ID; raises
    RuntimeError with an install hint when huggingface_hub is missing."""
    try:
        from huggingface_hub import hf_hub_download
    except ImportError as error:
        raise RuntimeError(
            "downloading needs the `huggingface_hub` package: pip install huggingface_hub "
            "(or pip install -e '.[data]')"
        ) from error

    def download(name: str, out_dir: Path) -> None:
        hf_hub_download(repo_id=FINEWEB_REPO_ID, filename=name, repo_type="dataset", local_dir=out_dir)

    return download


def download_fineweb(
    out_dir: str | Path, num_shards: int = DEFAULT_FINEWEB_SHARDS, download: Callable[[str, Path], None] | None = None
) -> list[str]:
    """Fetch the missing shards into out_dir; returns the names fetched. Network or server
    errors are re-raised as RuntimeError naming the file and the repo."""
    out = Path(out_dir)
    todo = missing_files(out, fineweb_filenames(num_shards))
    if not todo:
        return []
    download = download or hf_downloader()
    out.mkdir(parents=True, exist_ok=True)
    for name in todo:
        print(f"downloading {name} from {FINEWEB_REPO_ID} ...", flush=True)
        try:
            download(name, out)
        except Exception as error:
            raise RuntimeError(
                f"could not download {name} from the Hugging Face dataset {FINEWEB_REPO_ID} "
                f"({type(error).__name__}: {error}); check the network connection"
            ) from error
    return todo
