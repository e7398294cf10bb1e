"""torch_ref.optim: schedule tables of RECORD.md sections 4 and 7, Adam groups, one Adam step by hand."""

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
    lr_multiplier,
    muon_momentum,
    set_muon_momentum,
    window_blocks,
)

RECORD_STEPS = 1393

# RECORD.md section 4: (first step, window tokens, W_long, W_short).
WINDOW_TABLE = [
    (0, 128, 1, 0),
    (104, 256, 2, 1),
    (207, 384, 3, 1),
    (310, 512, 4, 2),
    (413, 640, 5, 2),
    (516, 768, 6, 3),
    (620, 896, 7, 3),
    (723, 1024, 8, 4),
    (826, 1152, 9, 4),
    (929, 1280, 10, 5),
    (1032, 1408, 11, 5),
    (1136, 1536, 12, 6),
    (1239, 1664, 13, 6),
    (1342, 1792, 14, 7),
]


@pytest.mark.parametrize("first_step, tokens, long_blocks, short_blocks", WINDOW_TABLE)
def test_window_table_row(first_step, tokens, long_blocks, short_blocks):
    assert long_blocks * 128 == tokens
    assert window_blocks(first_step, RECORD_STEPS) == (long_blocks, short_blocks)
    if first_step > 0:  # the row really starts here: the step before is still the previous row
        assert window_blocks(first_step - 1, RECORD_STEPS)[0] == long_blocks - 1


def test_window_schedule_covers_every_step_with_the_table():
    last_row = [row for row in WINDOW_TABLE if row[0] <= RECORD_STEPS][-1]
    assert window_blocks(RECORD_STEPS, RECORD_STEPS) == (last_row[2], last_row[3])
    for step in range(RECORD_STEPS + 1):
        row = max((r for r in WINDOW_TABLE if r[0] <= step), key=lambda r: r[0])
        assert window_blocks(step, RECORD_STEPS) == (row[2], row[3]), step


def test_window_follows_total_steps_and_max_tokens():
    # Tiny preset style: 200 steps up to 1024 tokens: the last step reaches 8 blocks.
    assert window_blocks(200, 200, max_tokens=1024) == (8, 4)
    assert window_blocks(0, 200, max_tokens=1024) == (1, 0)
    assert window_blocks(26, 200, max_tokens=1024) == (2, 1)  # 133.12 tokens -> 2 blocks
    with pytest.raises(ValueError, match="total_steps"):
        window_blocks(0, 0)


def test_lr_multiplier_record_values():
    for step in (0, 1, 500, 835):
        assert lr_multiplier(step, RECORD_STEPS) == 1.0
    # Values quoted (rounded to 5 decimals) in RECORD.md section 7.
    assert lr_multiplier(836, RECORD_STEPS) == pytest.approx(0.99968, abs=5e-6)
    assert lr_multiplier(1392, RECORD_STEPS) == pytest.approx(0.10162, abs=5e-6)
    assert lr_multiplier(1393, RECORD_STEPS) == pytest.approx(0.1, abs=1e-15)  # float64 round-off only
    # The decay is linear in the step: equal drops between consecutive steps of the cooldown.
    drops = [lr_multiplier(s, RECORD_STEPS) - lr_multiplier(s + 1, RECORD_STEPS) for s in range(836, 1392)]
    assert max(drops) - min(drops) < 1e-12  # float64 round-off only
    assert drops[0] == pytest.approx(0.9 / (0.4 * RECORD_STEPS), rel=1e-9)


def test_lr_multiplier_rejects_steps_outside_the_run():
    with pytest.raises(ValueError, match="outside"):
        lr_multiplier(1394, RECORD_STEPS)
    with pytest.raises(ValueError, match="outside"):
        lr_multiplier(-1, RECORD_STEPS)
    assert lr_multiplier(5, 10, cooldown_frac=0.0) == 1.0


def test_muon_momentum_values():
    assert muon_momentum(0) == 0.85
    assert muon_momentum(150) == pytest.approx(0.90, abs=1e-15)  # float64 round-off only
    assert muon_momentum(299) == pytest.approx(0.85 + 0.1 * 299 / 300, abs=1e-15)
    assert muon_momentum(300) == 0.95
    assert muon_momentum(1392) == 0.95
    with pytest.raises(ValueError, match="step"):
        muon_momentum(-1)


# ---------------------------------------------------------------------------------------------
# Optimizers on a small record-shaped model (12 layers, all per-layer patterns kept)


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
