"""JAX's persistent compilation cache for training runs: which folder, and turning it on.

A run's compiled steps are written to the cache folder and read back by the next run with the
same program, devices, XLA flags and jax version (JAX's cache key), so a second identical run
skips XLA's compilation (docs/BENCHMARKS.md, "Compilation cache"). The loaded executable is
the one compiled before, so the losses are bitwise those of an uncached run (tests/run/test_compile_cache.py).

The command line's folder, first found of: `--compile-cache DIR`, $JAXGPT_COMPILE_CACHE,
JAX's own $JAX_COMPILATION_CACHE_DIR, and `default_folder()`; the value `none` turns it off.
Like JAX's, the cache is trusted code: keep it in a folder only you can write.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

ENV_VAR = "JAXGPT_COMPILE_CACHE"
JAX_ENV_VAR = "JAX_COMPILATION_CACHE_DIR"
OFF = "none"


def default_folder(environ: Mapping[str, str] = os.environ) -> Path:
    """$XDG_CACHE_HOME/jaxgpt/jax-compile (~/.cache/jaxgpt/jax-compile when it is unset)."""
    base = environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "jaxgpt" / "jax-compile"


def resolve(flag: str | None, environ: Mapping[str, str] = os.environ) -> str | None:
    """The cache folder a command-line run uses (see the module docstring); None: no cache."""
    for value in (flag, environ.get(ENV_VAR), environ.get(JAX_ENV_VAR)):
        if value:
            return None if value.lower() == OFF else value
    return str(default_folder(environ))


def use(folder: str | None) -> str | None:
    """Point JAX's persistent cache at `folder` (None: no persistent cache) for the compilations
    that follow in this process, also after earlier ones (JAX decides once per process unless
    reset), and cache every program, not only those that took JAX's default 1 s to compile
    (overriding $JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS): a restarted run then also loads its
    small programs (the eval step, the parameter init's random draws). A folder that cannot be
    created or written is a note, not an error: the run then compiles as without a cache. Returns
    the folder in use."""
    import jax  # here, so that the command line's `resolve` imports no jax
    from jax.experimental.compilation_cache import compilation_cache

    if folder is not None:
        try:
            Path(folder).mkdir(parents=True, exist_ok=True)
            writable = os.access(folder, os.W_OK)
        except OSError:
            writable = False
        if not writable:
            print(f"note: compilation cache {folder} is not writable; compiling without it "
                  f"(--compile-cache DIR or {OFF})", file=sys.stderr)
            folder = None
    jax.config.update("jax_compilation_cache_dir", folder)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    compilation_cache.reset_cache()
    return folder
