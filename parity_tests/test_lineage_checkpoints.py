"""A checkpoint saved by each earlier record's own code (its state-dict names, LINEAGE.md 3.1,
4.1, 5.1, 6.1, with torch.compile's `_orig_mod.` prefix) loads into both frameworks' models of
that preset, every tensor in its place, and both infer the preset's dims from it."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from jaxgpt import config as jax_cfg
from jaxgpt import params as params_lib
from jaxgpt import presets as jax_presets
from jaxgpt.run import convert
from torch_ref import config as torch_cfg
from torch_ref import model as torch_model
from torch_ref import presets as torch_presets
from torch_ref.run import convert as torch_convert

LAYERS, DIM, ROWS = 12, 64, 1024  # every lineage table has the padded rows (50304 at full size)


def record_state_dict(name: str) -> dict[str, torch.Tensor]:
    """The record's own keys (in its state_dict order) with distinct values, at width 64."""
    dim, hidden = DIM, 4 * DIM
    keys: list[tuple[str, tuple[int, ...]]] = []
    if name in ("untie-embed", "shortcuts", "unet-value-embeds"):
        if name == "unet-value-embeds":
            keys.append(("skip_weights", (6,)))
        keys.append(("transformer.wte.weight", (ROWS, dim)))
        if name == "unet-value-embeds":
            keys.append(("transformer.vte.weight", (ROWS, 6 * dim)))
        for i in range(LAYERS):
            block = f"transformer.h.{i}."
            if name != "untie-embed":
                keys.append((block + "lambdas", (2,)))
            if name == "shortcuts":
                keys.append((block + "attn.lamb", ()))
            if name == "unet-value-embeds":
                keys.append((block + "attn.lambdas", (2,)))
            keys += [(block + f"attn.c_{p}.weight", (dim, dim)) for p in "qkv"]
            if name == "unet-value-embeds":
                keys.append((block + "attn.rotary.inv_freq", (dim // 4,)))  # a persistent buffer, 2 heads of 32
            keys += [(block + "attn.c_proj.weight", (dim, dim)), (block + "mlp.c_fc.weight", (hidden, dim)),
                     (block + "mlp.c_proj.weight", (dim, hidden))]
    elif name == "softcap":
        keys += [("skip_weights", (6,)), ("embed.weight", (ROWS, dim))]
        for i in range(LAYERS):
            block = f"blocks.{i}."
            keys.append((block + "lambdas", (2,)))
            if i != 7:
                keys.append((block + "attn.lambdas", (2,)))
                keys += [(block + f"attn.c_{p}.weight", (dim, dim)) for p in "qkv"]
                keys.append((block + "attn.c_proj.weight", (dim, dim)))
            keys += [(block + "mlp.c_fc.weight", (hidden, dim)), (block + "mlp.c_proj.weight", (dim, hidden))]
        keys += [(f"value_embeds.embed.{k}.weight", (ROWS, dim)) for k in range(3)]
    keys.append(("lm_head.weight", (ROWS, dim)))
    generator = torch.Generator().manual_seed(0)
    return {"_orig_mod." + key: torch.randn(shape, generator=generator) for key, shape in keys}


@pytest.mark.parametrize("name", ["untie-embed", "shortcuts", "unet-value-embeds", "softcap"])
def test_record_checkpoint_loads_into_both_frameworks(name):
    state = record_state_dict(name)
    base_jax = jax_cfg.replace(jax_presets.get_preset(name).model, vocab_size=1000, eot_id=999)
    base_torch = torch_cfg.replace(torch_presets.get_preset(name).model, vocab_size=1000, eot_id=999)
    # Dims from the shapes (the width override of --init-from): D 64, 2 heads of 32, vocab kept.
    jax_config = convert.model_config_from_state_dict(state, base_jax, head_dim=32)
    torch_config = torch_convert.model_config_from_state_dict(base_torch, state, 32)
    for config in (jax_config, torch_config):
        assert (config.model_dim, config.num_heads, config.vocab_size) == (DIM, 2, 1000)
    assert jax_config.attention_free_layers == torch_config.attention_free_layers == base_jax.attention_free_layers
    params = convert.torch_state_dict_to_params(state, jax_config)
    assert set(params) == set(params_lib.param_shapes(jax_config))
    torch_gpt = torch_model.GPT.from_config(torch_config, attention="sdpa", fp8_head=False)
    torch_convert.load_record_state_dict(torch_gpt, state)
    loaded = {key: value.numpy() for key, value in torch_gpt.state_dict().items()}
    assert set(loaded) == set(params)
    for key, value in params.items():  # the same tensor under the same name on both sides
        np.testing.assert_array_equal(np.asarray(value, np.float32), loaded[key], err_msg=key)
    # Spot checks of the mapping itself.
    if name == "unet-value-embeds":
        np.testing.assert_array_equal(loaded["value_embeds.embed.0.weight"], state["_orig_mod.transformer.vte.weight"])
    np.testing.assert_array_equal(loaded["blocks.3.attn.k_w"],
                                  state[f"_orig_mod.{'blocks' if name == 'softcap' else 'transformer.h'}.3.attn.c_k.weight"])
