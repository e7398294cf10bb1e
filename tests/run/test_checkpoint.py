"""jaxgpt.run.checkpoint: orbax save/restore of replicated state, retention, config checks, export."""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import optax
import pytest
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from jaxgpt.config import replace
from jaxgpt.config_json import config_to_json
from jaxgpt.presets import get_preset
from jaxgpt.run import checkpoint


@pytest.fixture(scope="module")
def replicated() -> NamedSharding:
    mesh = Mesh(np.array(jax.devices()[:4]), ("data",))
    return NamedSharding(mesh, P())


def _state(replicated: NamedSharding, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    params = {
        "embed.weight": jnp.asarray(rng.normal(size=(16, 8)), jnp.bfloat16),  # bf16 table as the record
        "blocks.0.attn.qkv_w": jnp.asarray(rng.normal(size=(3, 8, 8)), jnp.float32),
        "skip_weights": jnp.asarray(rng.normal(size=(2,)), jnp.float32),
    }
    params = jax.device_put(params, replicated)
    opt_state = jax.jit(optax.adam(1e-3).init, out_shardings=replicated)(params)
    return {"params": params, "opt_state": opt_state}


def _assert_same_tree(a, b) -> None:
    assert jax.tree.structure(a) == jax.tree.structure(b)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        assert x.dtype == y.dtype
        # Exact: a checkpoint stores the bytes, nothing is recomputed.
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_save_restore_roundtrip_keeps_values_dtypes_and_sharding(tmp_path, replicated):
    config = config_to_json(get_preset("tiny"))
    saved = _state(replicated, seed=0)
    manager = checkpoint.Checkpointer(tmp_path / "ckpt", max_to_keep=2)
    manager.save(7, saved, data_position={"shard_index": 1, "pos": 4096}, config=config)
    manager.close()

    reopened = checkpoint.Checkpointer(tmp_path / "ckpt", max_to_keep=2)
    template = _state(replicated, seed=1)  # different values, same structure
    restored, meta = reopened.restore(template, config=config)
    _assert_same_tree(restored, saved)
    assert meta["step"] == 7
    assert meta["data_position"] == {"shard_index": 1, "pos": 4096}
    for leaf in jax.tree.leaves(restored):
        assert leaf.sharding.is_equivalent_to(replicated, leaf.ndim)


def test_keeps_only_the_newest_checkpoints(tmp_path, replicated):
    config = config_to_json(get_preset("tiny"))
    manager = checkpoint.Checkpointer(tmp_path, max_to_keep=2)
    state = _state(replicated, seed=0)
    for step in (2, 4, 6):
        manager.save(step, state, data_position={"shard_index": 0, "pos": step}, config=config)
    manager.wait()
    assert manager.all_steps() == [4, 6]
    assert manager.latest_step() == 6
    assert manager.read_meta(4)["data_position"]["pos"] == 4
    manager.close()


def test_restore_refuses_a_different_config_and_names_the_fields(tmp_path, replicated):
    preset = get_preset("tiny")
    manager = checkpoint.Checkpointer(tmp_path, max_to_keep=1)
    manager.save(1, _state(replicated, 0), data_position={"shard_index": 0, "pos": 0}, config=config_to_json(preset))
    manager.wait()
    changed = dataclasses.replace(
        preset,
        train=replace(preset.train, steps=999, out_dir="elsewhere"),  # out_dir is output-only: allowed
        optim=replace(preset.optim, muon_lr=0.07),
    )
    with pytest.raises(ValueError) as info:
        manager.restore(_state(replicated, 0), config=config_to_json(changed))
    message = str(info.value)
    assert f"train.steps: {preset.train.steps} -> 999" in message
    assert "optim.muon_lr: 0.05 -> 0.07" in message
    assert "out_dir" not in message
    manager.close()


def test_missing_checkpoint_is_a_clear_file_error(tmp_path):
    manager = checkpoint.Checkpointer(tmp_path / "empty")
    with pytest.raises(FileNotFoundError, match="no checkpoint found"):
        manager.read_meta()
    manager.close()


def test_export_torch_writes_the_record_format(tmp_path):
    torch = pytest.importorskip("torch")
    params = {
        "embed.weight": np.arange(12, dtype=np.float32).reshape(4, 3).astype(ml_dtypes.bfloat16),
        "lm_head.weight": np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3),
    }
    path = checkpoint.export_torch(params, tmp_path / "out" / "model.pt")
    loaded = torch.load(path, map_location="cpu", weights_only=True)
    assert set(loaded) == {"model"}
    assert loaded["model"]["embed.weight"].dtype == torch.bfloat16
    np.testing.assert_array_equal(loaded["model"]["embed.weight"].float().numpy(), np.arange(12).reshape(4, 3))
    np.testing.assert_array_equal(loaded["model"]["lm_head.weight"].numpy(), params["lm_head.weight"])
