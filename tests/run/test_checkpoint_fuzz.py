"""Fuzzed: resuming from a damaged orbax checkpoint folder, and the run's saved config JSON (the
step folder's `meta` item), through every reader: `--resume` (checkpoint.open_run_checkpoints,
keep_saved_cadence, refuse_config_change, Checkpointer.restore) and the sampler
(jaxgpt.sample.load_checkpoint). Inputs: a real step folder with one file damaged
(tests.fuzzing.damaged: truncated, extended, bit-flipped, overwritten, random) or deleted, and
the meta item with one field replaced by any JSON value or deleted (tests.fuzzing.mutated).

Property: the saved arrays restore exactly (and the meta read is the file's), or one
ValueError / FileNotFoundError line naming the folder; nothing else raised, no hang, no huge
allocation, and no traceback printed by orbax or tensorstore (jaxgpt.run.quiet, as the commands
hold it).
"""

from __future__ import annotations

import json
import shutil

import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jaxgpt import config_json, presets, sample
from jaxgpt.run import checkpoint, quiet
from tests import fuzzing

pytestmark = pytest.mark.fuzz
PRESET = presets.get_preset("tiny")
STATE = {"params": {"embed.weight": jnp.arange(48, dtype=jnp.float32).reshape(6, 8), "scalars": jnp.ones(3)},
         "opt_state": {"mu": jnp.full((4, 2), 0.5, jnp.bfloat16), "count": jnp.int32(7)}}
META = {"data_position": {"shard_index": 0, "pos": 4096, "batches": 2}, "config": config_json.config_to_json(PRESET)}


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A checkpoint folder holding step 2 of STATE, and {relative path: bytes} of its files."""
    folder = tmp_path_factory.mktemp("saved") / "ckpt"
    writer = checkpoint.Checkpointer(folder, async_save=False)
    writer.save(2, STATE, data_position=META["data_position"], config=META["config"])
    writer.close()
    files = {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}
    return folder, files


def damaged_folders(files: dict[str, bytes]):
    """(relative path, new bytes or None to delete it) of one file of the folder."""
    names = sorted(files)
    damaged = st.sampled_from(names).flatmap(lambda name: fuzzing.damaged(files[name]).map(lambda raw: (name, raw)))
    deleted = st.sampled_from(names).map(lambda name: (name, None))
    meta_name = next(name for name in names if name.endswith("meta/metadata"))
    meta = json.loads(files[meta_name])
    edited = fuzzing.mutated(meta, fuzzing.json_values()).map(lambda m: (meta_name, json.dumps(m).encode()))
    return st.one_of(damaged, deleted, edited)


def copy_with(saved, tmp_path, change) -> object:
    folder, _ = saved
    target = tmp_path / "ckpt"
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(folder, target)
    name, raw = change
    if raw is None:
        (target / name).unlink()
    else:
        (target / name).write_bytes(raw)
    return target


def refused(error: BaseException, folder) -> None:
    assert isinstance(error, (ValueError, FileNotFoundError)), f"{type(error).__name__}: {error}"
    lines = str(error).strip().splitlines()
    assert str(folder) in lines[0], error
    # One line, or the documented list of a changed config (checkpoint.refuse_config_change).
    assert len(lines) == 1 or lines[0].endswith("differing fields (saved -> now):"), error


def file_meta(folder) -> object:
    try:
        return json.loads((folder / "2" / "meta" / "metadata").read_bytes())
    except (OSError, ValueError):
        return None


def resume(folder) -> tuple[dict, dict]:
    checkpointer, step, position, meta = checkpoint.open_run_checkpoints(PRESET, str(folder), "r", False)
    try:
        preset = checkpoint.keep_saved_cadence(PRESET, meta, ())
        checkpoint.refuse_config_change(meta, config_json.config_to_json(preset), folder)
        state, _ = checkpointer.restore(STATE, config=None, step=step)
        assert position.to_dict() == {"shard_index": 0, "pos": 4096, "batches": 2} or meta != META
        return state, meta
    finally:
        checkpointer.close()


def equal_trees(a, b) -> bool:
    return all(np.array_equal(np.asarray(x), np.asarray(y)) and np.asarray(x).dtype == np.asarray(y).dtype
               for x, y in zip(jax_leaves(a), jax_leaves(b), strict=True))


def jax_leaves(tree):
    import jax  # noqa: PLC0415

    return jax.tree.leaves(tree)


@pytest.mark.parametrize("reader", ["resume", "sampler"])
def test_damaged_checkpoint_folders_and_saved_config(saved, tmp_path, capfd, reader):
    @settings(max_examples=fuzzing.examples(25))
    @given(change=damaged_folders(saved[1]))
    def property_holds(change):
        folder = copy_with(saved, tmp_path, change)
        with fuzzing.guarded():
            try:
                if reader == "resume":
                    state, meta = resume(folder)
                    assert equal_trees(state, STATE), "the restored state differs from the saved one"
                    assert meta == file_meta(folder)
                else:
                    loaded = sample.load_checkpoint(folder)
                    assert equal_trees(loaded.params, STATE["params"]), "the sampler read other parameters"
            except (AssertionError, fuzzing.Hang, fuzzing.HugeAllocation):
                raise
            except Exception as error:  # noqa: BLE001 - the property: ValueError / FileNotFoundError naming it
                refused(error, folder)
        assert "Traceback" not in capfd.readouterr().err

    with quiet.third_party_errors(debug=False):  # as the commands hold it, for the whole run
        property_holds()
