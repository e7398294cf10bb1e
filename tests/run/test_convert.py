"""jaxgpt.run.convert: record state dicts <-> jaxgpt parameters."""

from __future__ import annotations

import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest
import torch
from flax import nnx

from jaxgpt import model as M
from jaxgpt import params as params_lib
from jaxgpt.config import ModelConfig, replace
from jaxgpt.run import convert

CONFIG = ModelConfig(num_heads=2, model_dim=128, vocab_size=1000, eot_id=999, dtype_policy="fp32")


def _record_state_dict(config: ModelConfig = CONFIG, dtype_embeddings=torch.float32) -> dict[str, torch.Tensor]:
    """A random state dict with the record's keys and shapes (built from jaxgpt's own shapes)."""
    generator = torch.Generator().manual_seed(0)
    state = {}
    for name, shape in params_lib.param_shapes(config).items():
        tensor = torch.randn(tuple(shape.shape), generator=generator)
        state[name] = tensor.to(dtype_embeddings) if "embed" in name else tensor
    return state


def test_infers_config_from_shapes():
    inferred = convert.model_config_from_state_dict(_record_state_dict(), eot_id=999)
    assert (inferred.vocab_size, inferred.model_dim, inferred.num_heads, inferred.num_layers) == (1000, 128, 1, 12)
    assert inferred.attention_free_layers == (7,)
    assert convert.model_config_from_state_dict(_record_state_dict(), head_dim=64, eot_id=999).num_heads == 2
    assert convert.model_config_from_state_dict(_record_state_dict(), eot_id=9, dtype_policy="fp32").dtype_policy == "fp32"
    with pytest.raises(ValueError, match="too few for the GPT-2 EOT id"):
        convert.model_config_from_state_dict(_record_state_dict())


def test_record_preset_shapes_infer_the_record_config():
    # Zero-stride arrays have the record's shapes without allocating 275M parameters.
    record_shaped = {name: np.lib.stride_tricks.as_strided(np.zeros(1, np.float32), s.shape, [0] * len(s.shape))
                     for name, s in params_lib.param_shapes(ModelConfig()).items()}
    assert convert.model_config_from_state_dict(record_shaped) == ModelConfig()


@pytest.mark.parametrize("embed_dtype", [torch.float32, torch.bfloat16])
def test_torch_to_jax_to_torch_is_exact(embed_dtype):
    state = _record_state_dict(dtype_embeddings=embed_dtype)
    compiled = {f"_orig_mod.{k}": v for k, v in state.items()}  # torch.compile's prefix is stripped
    params = convert.torch_state_dict_to_params(compiled, CONFIG)
    if embed_dtype == torch.bfloat16:
        assert params["embed.weight"].dtype == ml_dtypes.bfloat16
    back = convert.params_to_torch_state_dict(params)
    assert set(back) == set(state)
    for name, tensor in state.items():
        assert back[name].dtype == tensor.dtype, name
        assert torch.equal(back[name], tensor), name  # bit-exact, bf16 included


def test_load_params_into_model_and_back():
    state = _record_state_dict(dtype_embeddings=torch.bfloat16)
    model = M.GPT(replace(CONFIG, dtype_policy="record"), rngs=nnx.Rngs(0))
    convert.load_params(model, convert.torch_state_dict_to_params(state, head_dim=64, eot_id=999))
    back = convert.params_to_torch_state_dict({k: np.asarray(v) for k, v in params_lib.param_dict(model).items()})
    for name, tensor in state.items():
        assert torch.equal(back[name], tensor), name


def test_bad_keys_are_all_listed():
    state = _record_state_dict()
    del state["skip_weights"]
    del state["blocks.3.mlp.c_fc.weight"]
    state["blocks.7.attn.qkv_w"] = torch.zeros(3, 128, 128)
    state["rotary.cos"] = torch.zeros(4)
    state["lm_head.weight"] = torch.zeros(1000, 128)
    with pytest.raises(ValueError) as err:
        convert.torch_state_dict_to_params(state, CONFIG)
    message = str(err.value)
    for fragment in ("skip_weights", "blocks.3.mlp.c_fc.weight", "blocks.7.attn.qkv_w", "rotary.cos",
                     "lm_head.weight: got (1000, 128), expected (1024, 128)"):
        assert fragment in message


def test_inference_errors_are_clear():
    state = _record_state_dict()
    with pytest.raises(ValueError, match="embed.weight"):
        convert.model_config_from_state_dict({k: v for k, v in state.items() if k != "embed.weight"})
    with pytest.raises(ValueError, match="not divisible by head_dim 96"):
        convert.model_config_from_state_dict(state, head_dim=96, eot_id=999)
    with pytest.raises(ValueError, match="the config's per-layer patterns are for 12 layers; choose a preset"):
        convert.model_config_from_state_dict({k: v for k, v in state.items() if not k.startswith("blocks.11.")}, eot_id=999)


def test_numpy_input_is_accepted():
    state = {k: v.numpy() for k, v in _record_state_dict().items()}
    params = convert.torch_state_dict_to_params(state, CONFIG)
    for name, array in state.items():
        np.testing.assert_array_equal(params[name], array)


def test_jaxgpt_imports_without_torch():
    # Block torch at import time: jaxgpt.model and jaxgpt.run.convert must still import.
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "import jaxgpt.model, jaxgpt.run.convert\n"
        "print('ok')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and "ok" in result.stdout, result.stderr
