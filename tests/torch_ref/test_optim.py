"""torch_ref.optim: Adam groups, the schedulers and momentum following the step, one Adam step by hand."""

from __future__ import annotations

import pytest
import torch

from jaxgpt.config import OptimConfig
from torch_ref.model import GPT, cast_embeddings_to_bf16
from torch_ref.muon import Muon
from torch_ref.optim import (
    adam_param_groups,
    build_lr_schedulers,
    build_optimizers,
    hidden_matrix_params,
    set_muon_momentum,
)
from torch_ref.schedules import lr_multiplier, muon_momentum


def _small_gpt(seed: int = 0) -> GPT:
    torch.manual_seed(seed)
    # A small vocabulary keeps the embedding tables cheap; the EOT id must lie inside it.
    return GPT(vocab_size=1000, num_layers=12, num_heads=1, model_dim=32, rotary_max_len=256, eot_id=999)


def test_adam_groups_match_the_record():
    model = _small_gpt()
    names = {id(p): n for n, p in model.named_parameters()}
    groups = adam_param_groups(model, OptimConfig())
    assert [g["name"] for g in groups] == ["head", "embed", "scalars"]
    assert [g["lr"] for g in groups] == [0.008, 0.6, 0.04]
    assert [names[id(p)] for p in groups[0]["params"]] == ["lm_head.weight"]
    assert [names[id(p)] for p in groups[1]["params"]] == ["embed.weight"] + [
        f"value_embeds.embed.{i}.weight" for i in range(3)
    ]
    # Model order is torch's named_parameters order: a module's own parameters before its
    # children's, so skip_weights (GPT's own) comes first and each block's lambdas precede its
    # attn.lambdas, as in the record's script (RECORD.md 6 words it differently). Order within a
    # group does not change Adam's math.
    want_scalars = ["skip_weights"]
    for i in range(12):
        want_scalars.append(f"blocks.{i}.lambdas")
        if i != 7:  # block 7 has no attention
            want_scalars.append(f"blocks.{i}.attn.lambdas")
    assert [names[id(p)] for p in groups[2]["params"]] == want_scalars
    assert sum(p.numel() for p in groups[2]["params"]) == 52  # RECORD.md 6: 24 tensors, 52 scalars


def test_build_optimizers_partitions_every_parameter():
    model = _small_gpt()
    adam, muon = build_optimizers(model, OptimConfig())
    assert isinstance(muon, Muon)
    assert adam.defaults["betas"] == (0.8, 0.95) and adam.defaults["eps"] == 1e-10
    assert adam.defaults["weight_decay"] == 0.0 and adam.defaults["fused"]
    muon_ids = [id(p) for g in muon.param_groups for p in g["params"]]
    adam_ids = [id(p) for g in adam.param_groups for p in g["params"]]
    assert sorted(muon_ids + adam_ids) == sorted(id(p) for p in model.parameters())
    assert len(hidden_matrix_params(model)) == 11 * 2 + 12 * 2  # qkv_w, attn c_proj; c_fc, mlp c_proj
    assert {g["lr"] for g in muon.param_groups} == {0.05}
    assert muon.ns_dtype == torch.bfloat16
    _, muon32 = build_optimizers(model, OptimConfig(ns_dtype="fp32"))
    assert muon32.ns_dtype == torch.float32


@pytest.mark.filterwarnings("ignore:Detected call of `lr_scheduler.step\\(\\)` before")
def test_schedulers_and_momentum_follow_the_step():
    model = _small_gpt()
    adam, muon = build_optimizers(model, OptimConfig())
    schedulers = build_lr_schedulers((adam, muon), total_steps=10, optim_config=OptimConfig())
    seen = []
    for step in range(10):
        assert set_muon_momentum(muon, step, OptimConfig()) == muon_momentum(step)
        seen.append([g["lr"] for g in adam.param_groups] + [muon.param_groups[0]["lr"]])
        for sched in schedulers:
            sched.step()  # no optimizer.step: only the lr bookkeeping is under test
    for step, lrs in enumerate(seen):
        f = lr_multiplier(step, 10)
        assert lrs == pytest.approx([0.008 * f, 0.6 * f, 0.04 * f, 0.05 * f], rel=1e-12)


def _adam_by_hand(p, g, lr, k_steps, dtype):
    """RECORD.md 6: fp32 arithmetic, moments and parameter stored in the parameter's dtype."""
    m = torch.zeros_like(p)
    v = torch.zeros_like(p)
    for k in range(1, k_steps + 1):
        gf = g.float()
        m32 = 0.8 * m.float() + 0.2 * gf
        v32 = 0.95 * v.float() + 0.05 * gf * gf
        m, v = m32.to(dtype), v32.to(dtype)
        p = (p.float() - (lr / (1 - 0.8**k)) * m32 / (v32.sqrt() / (1 - 0.95**k) ** 0.5 + 1e-10)).to(dtype)
    return p


@pytest.mark.parametrize("bf16_embeddings", [False, True])
def test_adam_steps_equal_the_formula(bf16_embeddings):
    model = _small_gpt()
    if bf16_embeddings:
        cast_embeddings_to_bf16(model)
    adam, _ = build_optimizers(model, OptimConfig())
    gen = torch.Generator().manual_seed(1)
    grads = {id(p): (torch.randn(p.shape, generator=gen) * 1e-3).to(p.dtype) for p in model.parameters()}
    before = {id(p): p.detach().clone() for p in model.parameters()}
    for _ in range(2):
        for p in model.parameters():
            p.grad = grads[id(p)].clone()
        adam.step()
    for group in adam.param_groups:
        for p in group["params"]:
            want = _adam_by_hand(before[id(p)], grads[id(p)], group["lr"], 2, p.dtype)
            assert p.dtype == want.dtype
            if p.dtype == torch.bfloat16:
                # Same fp32 math, one bf16 rounding at the store: at most 1 bf16 ulp (2^-7 relative).
                torch.testing.assert_close(p.detach(), want, rtol=2**-7, atol=0)
                assert adam.state[p]["exp_avg"].dtype == torch.bfloat16  # bf16 moments, as the record
            else:
                # fp32 round-off in the kernel's own op order, on values up to ~4 (N(0,1)
                # embeddings moved by lr 0.6): a few 1e-7 absolute.
                torch.testing.assert_close(p.detach(), want, rtol=1e-6, atol=1e-6)
