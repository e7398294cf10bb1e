"""Shared set-up for cross-framework parity tests: one seeded torch_ref model, its weights
perturbed so that every path carries signal, converted into jaxgpt.

Helpers are plain functions (usable from any parity test) plus a few fixtures built on them.

A test that runs a record's own code carries `@pytest.mark.upstream_logs(name, ...)`: where one of
those records' logs is absent it is skipped with the reason and the way to get the logs, or fails
with the same reason under JAXGPT_REQUIRE_UPSTREAM_LOGS=1 (`.ci/run`; record_logs.check_logs).
"""

from __future__ import annotations

import pytest
import torch
from flax import nnx

from jaxgpt import model as jax_model
from jaxgpt.config import ModelConfig, fp8_grad_scale_for, replace
from jaxgpt.run import convert
from jaxgpt_tools.parity.measures import perturb_parameters
from jaxgpt_tools.parity.record_logs import RequiredLogsMissing, check_logs
from torch_ref import model as torch_model

# 12 layers (the record's per-layer patterns), 2 heads of 64, a small vocabulary whose padding
# (1000 -> 1024) still exercises the padded classes, and a window of up to 14 blocks.
PARITY_CONFIG = ModelConfig(
    vocab_size=1000, eot_id=999, num_heads=2, model_dim=128, dtype_policy="fp32",
    attention_backend="blocked", max_window_blocks=14,
)
PARITY_SEQ_LEN = 128 * 16  # long enough that a 14-block window differs from 13 and from full causal


def seeded_torch_model(config: ModelConfig, seed: int = 0, *, perturb: bool = True) -> torch_model.GPT:
    """torch_ref GPT for `config` built under torch.manual_seed(seed), in `config.dtype_policy`.

    perturb=True adds noise to every parameter (the zero-initialised projections and head
    included) so that no path is silent. "record" policy: bf16 embeddings, CPU-emulated FP8
    head in train mode with config.fp8_grad_scale; "fp32": everything fp32, no FP8.
    SDPA attention with an explicit mask (eager flex_attention ignores windows on the CPU).
    """
    torch.manual_seed(seed)
    model = torch_model.GPT(
        config.vocab_size, config.num_layers, config.num_heads, config.model_dim,
        attention="sdpa", fp8_head=config.dtype_policy == "record", fp8_backend="emulated",
        fp8_grad_scale=config.fp8_grad_scale, rotary_max_len=config.rope_max_len, eot_id=config.eot_id,
        value_embed_slots=config.value_embed_slots, long_window_layers=config.long_window_layers,
        attention_free_layers=config.attention_free_layers,
    )
    if perturb:
        perturb_parameters(model, seed)
    if config.dtype_policy == "record":
        torch_model.cast_embeddings_to_bf16(model)
    return model


def jax_model_from_torch(torch_gpt: torch.nn.Module, config: ModelConfig) -> jax_model.GPT:
    """jaxgpt GPT(config) holding torch_gpt's weights (through jaxgpt.run.convert)."""
    params = convert.torch_state_dict_to_params(torch_gpt.state_dict(), config)
    model = jax_model.GPT(config, rngs=nnx.Rngs(0))
    convert.load_params(model, params)
    return model


@pytest.hookimpl(tryfirst=True)  # before the test's fixtures, which may read the logs
def pytest_runtest_setup(item: pytest.Item) -> None:
    names = [name for mark in item.iter_markers("upstream_logs") for name in mark.args]
    if not names:
        return
    try:
        reason, required = check_logs(names), False
    except RequiredLogsMissing as error:
        reason, required = str(error), True
    if required:
        pytest.fail(reason, pytrace=False)  # outside the except: the message alone, no chained traceback
    if reason is not None:
        pytest.skip(reason)


@pytest.fixture(scope="session")
def parity_config() -> ModelConfig:
    return PARITY_CONFIG


@pytest.fixture(scope="session")
def fp32_model_pair() -> tuple[torch_model.GPT, jax_model.GPT]:
    """(torch_ref GPT, jaxgpt GPT) with the same perturbed weights, all-fp32 policy, eval mode."""
    torch_gpt = seeded_torch_model(PARITY_CONFIG, seed=0).eval()
    return torch_gpt, jax_model_from_torch(torch_gpt, PARITY_CONFIG)


@pytest.fixture(scope="session")
def record_model_pair() -> tuple[torch_model.GPT, jax_model.GPT]:
    """Same as fp32_model_pair under the record's bf16 policy (FP8 head when train mode is used)."""
    config = replace(PARITY_CONFIG, dtype_policy="record",
                     fp8_grad_scale=fp8_grad_scale_for(PARITY_SEQ_LEN))  # same |G * scale| as the record
    torch_gpt = seeded_torch_model(config, seed=0).eval()
    return torch_gpt, jax_model_from_torch(torch_gpt, config)
