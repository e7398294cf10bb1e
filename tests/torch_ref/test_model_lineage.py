"""torch_ref.model's lineage switches: the facts LINEAGE.md states, on torch_ref's side."""

from __future__ import annotations

import math

import pytest
import torch

from torch_ref import config as cfg
from torch_ref import layers as torch_layers
from torch_ref import loss as torch_loss
from torch_ref import model as model_lib
from torch_ref import presets
from torch_ref import rotary as torch_rotary


def test_rotary_table_kinds():
    cos, _ = torch_rotary.rotary_tables(128, 1024, kind="full", as_written=False)
    freq = 1.0 / 10000 ** (torch.arange(0, 128, 2, dtype=torch.float64) / 128)
    torch.testing.assert_close(cos.double(), torch.cos(torch.arange(1024.0, dtype=torch.float64)[:, None] * freq),
                               rtol=0, atol=2e-4)  # fp32 angles up to ~1000 rad
    compiled, _ = torch_rotary.rotary_tables(128, 65536, kind="full_bf16_freq")
    eager, _ = torch_rotary.rotary_tables(128, 65536, kind="full_bf16_freq_eager")
    assert torch.equal(eager[40001], eager[40000]) and not torch.equal(compiled[40001], compiled[40000])
    # As written (the default): the full tables are the fp32 ones rounded to bf16 once (NUMERICS.md).
    for kind in ("full", "full_bf16_freq", "full_bf16_freq_eager"):
        written, fp32 = torch_rotary.rotary_tables(128, 4096, kind=kind), torch_rotary.rotary_tables(128, 4096, kind=kind, as_written=False)
        assert torch.equal(written[0], fp32[0].bfloat16().float()) and not torch.equal(written[0], fp32[0])
        assert torch.equal(written[1], fp32[1].bfloat16().float())


def test_norm_eps_as_run_and_soft_caps():
    x = torch.ones(2, 768, dtype=torch.bfloat16)
    assert torch_layers.norm(x, "as_run")[0, 0].item() == pytest.approx(1 / math.sqrt(1 + 2**-7), abs=4e-3)
    assert torch_layers.norm(x)[0, 0].item() == 1.0
    z = torch.tensor([-300.0, -2.0, 0.0, 7.0, 300.0]).bfloat16()
    once = torch_loss.soft_cap(z, "tanh", 15.0)
    assert once.dtype == torch.float32 and once.abs().max().item() == 15.0
    assert torch.equal(once, (15 * torch.tanh(z.float() / 15)).bfloat16().float())
    assert torch.equal(torch_loss.soft_cap(z, "none"), z.float())


@pytest.fixture(scope="module")
def tiny_lineage():
    def build(name: str):
        config = cfg.replace(presets.get_preset(name).model, vocab_size=1000, eot_id=999, num_heads=2, model_dim=64)
        torch.manual_seed(0)
        return model_lib.apply_dtype_policy(model_lib.GPT.from_config(config, attention="sdpa", fp8_head=False),
                                            config.dtype_policy)
    return build


def test_dtype_policies(tiny_lineage):
    unet = dict(tiny_lineage("unet-value-embeds").named_parameters())  # #15: bf16 model, fp32 weights
    assert unet["value_embeds.embed.0.weight"].shape == (1024, 6 * 64)
    assert unet["value_embeds.embed.0.weight"].dtype == unet["blocks.0.lambdas"].dtype == torch.bfloat16
    weight = unet["blocks.0.attn.q_w"]
    assert weight.dtype == torch.float32 and torch.equal(weight, weight.bfloat16().float())
    assert weight.abs().max().item() > 0.03  # nn.Linear's bound 1/sqrt(64) = 0.125, not the record's 0.108
    untie = tiny_lineage("untie-embed")  # #8: fp32 parameters, bf16 matmuls, fp32 stream
    assert all(p.dtype == torch.float32 for p in untie.parameters())
    tokens = torch.randint(0, 999, (256,), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert untie.final_hidden(tokens, 0).dtype == torch.float32
        assert untie.logits(tokens, 0).dtype == torch.bfloat16


def test_causal_mask_ignores_documents(tiny_lineage):
    """#8/#9 attend across EOTs: with an EOT at 100, a token before it still changes the logits
    after it (a document mask would cut that path)."""
    model = model_lib.apply_dtype_policy(tiny_lineage("shortcuts"), "fp32").float().eval()
    with torch.no_grad():  # the zero-initialised head and projections would hide every path
        for param in model.parameters():
            param.add_(0.05 * torch.randn(param.shape, generator=torch.Generator().manual_seed(2)))
    tokens = torch.randint(0, 998, (256,), generator=torch.Generator().manual_seed(1))
    tokens[100] = 999  # EOT: a new document under a document mask
    changed = tokens.clone()
    changed[50] = (tokens[50] + 1) % 998
    with torch.no_grad():
        before, after = model.logits(tokens, 0), model.logits(changed, 0)
    assert (before[200] - after[200]).abs().max().item() > 1e-4
    torch.testing.assert_close(before[:50], after[:50], rtol=0, atol=0)  # causal: earlier queries untouched
