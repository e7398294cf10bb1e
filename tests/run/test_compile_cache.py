"""jaxgpt.run.compile_cache: which folder a run's persistent compilation cache uses, and that a run
whose steps are loaded from it trains exactly as a run that compiled them."""

from __future__ import annotations

import os
from pathlib import Path

import jax
import numpy as np
import pytest

from jaxgpt import config as cfg
from jaxgpt import data
from jaxgpt import train as train_lib
from jaxgpt.run import compile_cache
from jaxgpt.run.cli import parse_args
from jaxgpt.testing import small_model_config, synthetic_tokens


def test_folder_precedence():
    env = {"JAXGPT_COMPILE_CACHE": "a", "JAX_COMPILATION_CACHE_DIR": "b", "XDG_CACHE_HOME": "c"}
    assert compile_cache.resolve("flag", env) == "flag"
    assert compile_cache.resolve(None, env) == "a"
    assert compile_cache.resolve(None, {**env, "JAXGPT_COMPILE_CACHE": ""}) == "b"
    assert compile_cache.resolve(None, {"XDG_CACHE_HOME": "c"}) == str(Path("c") / "jaxgpt" / "jax-compile")
    assert compile_cache.resolve(None, {}) == str(Path.home() / ".cache" / "jaxgpt" / "jax-compile")
    # `none` at any level turns it off, also over a folder JAX's own variable names.
    assert compile_cache.resolve("NONE", env) is None
    assert compile_cache.resolve(None, {**env, "JAXGPT_COMPILE_CACHE": "none"}) is None


def test_command_line_default_is_the_sessions_own_cache_under_the_tests():
    # conftest points JAXGPT_COMPILE_CACHE at a fresh folder of the session: no test writes into
    # the user's cache folder.
    assert parse_args([])[1].compile_cache == os.environ["JAXGPT_TEST_COMPILE_CACHE"]
    assert parse_args([])[1].compile_cache != str(compile_cache.default_folder())
    assert parse_args(["--compile-cache", "some/dir"])[1].compile_cache == "some/dir"


def test_unwritable_folder_is_a_note_not_an_error(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    try:
        assert compile_cache.use(str(blocker / "cache")) is None
    finally:
        compile_cache.use(None)
    assert "not writable; compiling without it" in capsys.readouterr().err


def _train(folder: Path, cache: str | None, run_id: str) -> train_lib.RunResult:
    model = small_model_config()
    train = cfg.TrainConfig(
        train_files=str(folder / "cc_train_*.bin"), val_files=str(folder / "cc_val_*.bin"), steps=3, batch_tokens=2 * 256,
        seq_len=256, val_every=3, val_tokens=2 * 256, window_max_tokens=512, devices=1, out_dir=str(folder / "out"),
    )
    jax.clear_caches()  # each run compiles (or loads) its steps afresh, as a new process would
    return train_lib.train(cfg.Preset(model=model, optim=cfg.OptimConfig(), train=train),
                           train_lib.RunOptions(run_id=run_id, progress=False, compile_cache=cache))


@pytest.mark.slow
def test_cached_run_trains_bitwise_as_the_uncached_run(tmp_path):
    data.write_shard(tmp_path / "cc_train_000001.bin", synthetic_tokens(4_000, seed=21))
    data.write_shard(tmp_path / "cc_val_000000.bin", synthetic_tokens(2_000, seed=22))
    cache = tmp_path / "cache"
    events: list[str] = []

    def count(event: str, **_: object) -> None:
        events.append(event)

    jax.monitoring.register_event_listener(count)
    try:
        # Cold: nothing to load, every step compiled (and written to the cache): an uncached run.
        uncached = _train(tmp_path, str(cache), "cold")
        # Every compilation is cached, however fast this machine compiles the small steps.
        assert jax.config.jax_persistent_cache_min_compile_time_secs == 0
        assert "/jax/compilation_cache/cache_hits" not in events
        assert any(cache.iterdir()), "the first run wrote no cache entry"
        cached = _train(tmp_path, str(cache), "warm")
        hits = events.count("/jax/compilation_cache/cache_hits")
    finally:
        jax.monitoring.unregister_event_listener(count)
        compile_cache.use(None)
    # The warm run loaded its train and eval steps (and the small helpers) instead of compiling them.
    assert hits >= 2, f"{hits} cache hits"
    assert cached.train_losses == uncached.train_losses  # bitwise: the same executables run
    assert cached.val_losses == uncached.val_losses
    for name, value in uncached.params.items():
        np.testing.assert_array_equal(cached.params[name], value, err_msg=name)
