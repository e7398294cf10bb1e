"""torch_ref.model: the record's GPT (names, shapes, init, rotary, RMSNorm, head, loss, masks per layer,
a CPU training step, loading record checkpoints, model dims read off a state dict). Tiny widths
(2 heads of 64, D = 128) but the record's 12 layers and 50257-token vocabulary (EOT is 50256)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from jaxgpt.config import EOT_ID
from torch_ref import attention as torch_attention
from torch_ref import layers as torch_layers
from torch_ref import loss as torch_loss
from torch_ref import model as model_lib
from torch_ref import rotary as torch_rotary
from torch_ref.model import GPT, cast_embeddings_to_bf16
from torch_ref.presets import get_preset
from torch_ref.run.convert import load_record_state_dict, model_config_from_state_dict

VOCAB, LAYERS, HEADS, DIM = 50257, 12, 2, 128
PADDED_VOCAB = 50304
SEQ_LEN = 256
NO_VALUE_EMBED_LAYERS = (3, 4, 5, 6, 8)  # with attention but no value embedding
VALUE_EMBED_LAYERS = (0, 1, 2, 9, 10, 11)


def tiny_gpt(seed: int = 0, **kwargs) -> GPT:
    torch.manual_seed(seed)
    kwargs.setdefault("rotary_max_len", 2048)  # positions < T give the same table entries as 65536
    return GPT(VOCAB, LAYERS, HEADS, DIM, attention="sdpa", **kwargs)


@torch.no_grad()
def perturb(model: GPT, seed: int = 0) -> GPT:
    """Non-zero projections, head and lambdas, so that every path carries signal."""
    generator = torch.Generator().manual_seed(seed)
    for name, param in model.named_parameters():
        noise = torch.randn(param.shape, generator=generator)
        if param.ndim >= 2 and "embed" not in name:
            param.add_(noise.to(param.dtype) * 0.5 / math.sqrt(param.shape[-1]))
        elif param.ndim == 1:
            param.add_(noise * 0.1)
    return model


def tokens(seed: int = 0, seq_len: int = SEQ_LEN, eots=(0, 77, 200)) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    seq = torch.randint(0, EOT_ID, (seq_len + 1,), generator=generator)
    seq[list(eots)] = EOT_ID
    return seq[:-1].to(torch.int32), seq[1:].to(torch.int64)


def record_parameter_table(num_layers: int, dim: int, vocab: int, padded: int) -> list[tuple[str, tuple]]:
    """RECORD.md 2.1 in registration order (state_dict order: a module's own parameters first)."""
    table = [("skip_weights", (num_layers // 2,)), ("embed.weight", (vocab, dim))]
    table += [(f"value_embeds.embed.{k}.weight", (vocab, dim)) for k in range(3)]
    for i in range(num_layers):
        table.append((f"blocks.{i}.lambdas", (2,)))
        if i != 7:
            table += [(f"blocks.{i}.attn.qkv_w", (3, dim, dim)), (f"blocks.{i}.attn.lambdas", (2,)),
                      (f"blocks.{i}.attn.c_proj.weight", (dim, dim))]
        table += [(f"blocks.{i}.mlp.c_fc.weight", (4 * dim, dim)), (f"blocks.{i}.mlp.c_proj.weight", (dim, 4 * dim))]
    return table + [("lm_head.weight", (padded, dim))]


def test_full_record_model_names_shapes_and_count():
    with torch.device("meta"):  # no allocation: 275M parameters and the rotary tables stay symbolic
        model = GPT(50257, 12, 6, 768)
    got = [(name, tuple(p.shape)) for name, p in model.state_dict().items()]
    assert got == record_parameter_table(12, 768, 50257, 50304)
    assert sum(p.numel() for p in model.parameters()) == 275_598_388
    hidden = sum(p.numel() for n, p in model.named_parameters() if n.startswith("blocks") and p.ndim >= 2)
    assert hidden == 82_575_360
    assert all(p.dtype == torch.float32 for p in model.parameters())
    assert model.blocks[7].attn is None


def test_construction_consumes_rng_in_record_order():
    model = tiny_gpt(seed=3)
    torch.manual_seed(3)

    def uniform(*shape, fan_in):
        bound = 3**0.5 * 0.5 / fan_in**0.5
        return torch.empty(*shape).uniform_(-bound, bound)

    expected = {"embed.weight": torch.empty(VOCAB, DIM).normal_()}
    for k in range(3):
        expected[f"value_embeds.embed.{k}.weight"] = torch.empty(VOCAB, DIM).normal_()
    for i in range(LAYERS):
        if i != 7:
            expected[f"blocks.{i}.attn.qkv_w"] = uniform(3, DIM, DIM, fan_in=DIM)
            uniform(DIM, DIM, fan_in=DIM)  # attention c_proj: drawn, then zeroed
        expected[f"blocks.{i}.mlp.c_fc.weight"] = uniform(4 * DIM, DIM, fan_in=DIM)
        uniform(DIM, 4 * DIM, fan_in=4 * DIM)  # mlp c_proj: drawn, then zeroed
    uniform(PADDED_VOCAB, DIM, fan_in=DIM)  # lm_head: drawn, then zeroed
    after = torch.rand(4)
    state = model.state_dict()
    for name, value in expected.items():
        assert torch.equal(state[name], value), name
    torch.manual_seed(3)
    tiny_gpt(seed=3)
    assert torch.equal(torch.rand(4), after)  # nothing else drew from the generator


def test_init_bounds_zeros_and_scalars():
    model = tiny_gpt()
    bound = 3**0.5 * 0.5 / DIM**0.5
    for i, block in enumerate(model.blocks):
        assert block.lambdas.tolist() == [1.0, 0.0]
        assert block.mlp.c_fc.weight.abs().max() <= bound
        assert block.mlp.c_fc.weight.abs().max() > 0.99 * bound  # uniform over the whole interval
        assert not block.mlp.c_proj.weight.any()
        if block.attn is not None:
            assert block.attn.qkv_w.abs().max() <= bound and block.attn.qkv_w.abs().max() > 0.99 * bound
            assert block.attn.lambdas.tolist() == [0.5, 0.5]
            assert not block.attn.c_proj.weight.any()
    assert not model.lm_head.weight.any()
    assert model.skip_weights.tolist() == [1.0] * 6
    assert abs(model.embed.weight.std().item() - 1.0) < 0.01  # N(0, 1), 6.4M samples


def test_rotary_tables_sign_and_half_split():
    head_dim = 64
    cos, sin = torch_rotary.rotary_tables(head_dim, 300)
    assert cos.shape == (300, 32) and cos.dtype == torch.float32
    freq = (1 / 1024) ** torch.linspace(0, 1, 16)
    torch.testing.assert_close(cos[299, :16], torch.cos(299 * freq), rtol=0, atol=1e-6)  # fp32 cos
    assert (cos[:, 16:] == 1).all() and (sin[:, 16:] == 0).all()  # zero frequencies: unrotated dims
    rotary = torch_rotary.Rotary(cos, sin)
    t, j = 123, 5
    x = torch.zeros(1, 300, 1, head_dim)
    x[0, :, 0, j] = 1.0  # a unit vector in the first half, pairing with dim j + 32
    y = rotary(x)[0, t, 0]
    # The record's sign: (x1, x2) -> (x1 c + x2 s, -x1 s + x2 c).
    torch.testing.assert_close(y[j], cos[t, j], rtol=0, atol=0)
    torch.testing.assert_close(y[j + 32], -sin[t, j], rtol=0, atol=0)
    assert y.count_nonzero() == 2
    passthrough = torch.zeros(1, 300, 1, head_dim)
    passthrough[..., 20] = 3.0  # dim 20 has frequency 0
    assert torch.equal(rotary(passthrough), passthrough)
    bf16 = rotary(x.bfloat16())
    assert bf16.dtype == torch.bfloat16
    with pytest.raises(ValueError, match="exceeds the rotary table"):
        rotary(torch.zeros(1, 301, 1, head_dim))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rms_norm_uses_fp32_machine_epsilon(dtype):
    assert torch_layers.RMS_EPS == 2.0**-23
    x = torch.full((4, 128), 2e-4).to(dtype)  # mean square ~ 4e-8: eps 2^-23 (1.2e-7) dominates
    expected = x.float() / torch.sqrt(x.float().square().mean(-1, keepdim=True) + 2.0**-23)
    out = torch_layers.norm(x)
    assert out.dtype == dtype
    # fp32: a few ulps; bf16: one rounding of an fp32 result.
    torch.testing.assert_close(out.float(), expected, rtol=1e-5 if dtype == torch.float32 else 2**-8, atol=0)
    wrong_eps = x.float() / torch.sqrt(x.float().square().mean(-1, keepdim=True) + 1e-6)
    assert (out.float() - wrong_eps).abs().min() > 0.1  # a 1e-6 eps would be visibly different


@pytest.fixture(scope="module")
def init_model():
    return tiny_gpt()


@pytest.mark.slow
@pytest.mark.parametrize("bf16", [False, True])
def test_logits_and_loss_at_init(init_model, bf16):
    model = cast_embeddings_to_bf16(tiny_gpt()) if bf16 else init_model
    x, y = tokens()
    with torch.no_grad():
        model.eval()
        logits = model.logits(x, 2)
        assert logits.shape == (SEQ_LEN, PADDED_VOCAB)
        assert logits.dtype == (torch.bfloat16 if bf16 else torch.float32)
        assert (torch_loss.soft_cap(logits) == 15.0).all()  # zero head: 30 * sigmoid(0)
        eval_loss = model(x, y, 2)
        model.train()
        train_loss = model(x, y, 2)  # FP8 head: zero weights quantise to zero as well
    for loss in (eval_loss, train_loss):
        assert loss.dtype == torch.float32
        assert abs(loss.item() - math.log(PADDED_VOCAB)) < 1e-5  # uniform over all 50304 classes


def test_soft_cap_is_a_shifted_tanh_in_fp32():
    z = torch.linspace(-100, 100, 101).bfloat16()
    capped = torch_loss.soft_cap(z)
    assert capped.dtype == torch.float32
    torch.testing.assert_close(capped, 15 * torch.tanh(z.float() / 15) + 15, rtol=1e-6, atol=1e-5)  # fp32


@pytest.fixture(scope="module")
def perturbed_fp32():
    return perturb(tiny_gpt(seed=1), seed=1).eval()


@pytest.mark.slow
def test_eval_head_is_the_plain_lm_head_and_train_head_is_fp8(perturbed_fp32):
    model = perturbed_fp32
    x, _ = tokens()
    with torch.no_grad():
        hidden = model.final_hidden(x, 3)
        assert hidden.shape == (1, SEQ_LEN, DIM) and hidden.dtype == torch.float32
        assert torch.equal(model.logits(x, 3), F.linear(hidden, model.lm_head.weight)[0])
        model.train()
        fp8_logits = model.logits(x, 3)
        model.eval()
    plain = F.linear(hidden, model.lm_head.weight)[0]
    assert not torch.equal(fp8_logits, plain)
    # e4m3 operands: |error| <= ((1 + 2^-4)^2 - 1) * sum |x| |w|.
    bound = (hidden[0].abs() @ model.lm_head.weight.abs().T) * ((1 + 2**-4) ** 2 - 1) + 1e-5
    assert ((fp8_logits - plain).abs() <= bound).all()


@pytest.mark.slow
def test_document_isolation_causality_and_window(perturbed_fp32):
    model = perturbed_fp32
    x, _ = tokens(eots=(0, 100))  # documents [0, 100) and [100, 256); blocks 0 and 1
    window = 1  # long window 1 block: a query sees only its own block of its document
    with torch.no_grad():
        base = model.logits(x, window)
        changed = x.clone()
        changed[50] = (x[50] + 1) % EOT_ID  # inside document 1, block 0
        out = model.logits(changed, window)
        assert torch.equal(out[:50], base[:50])  # causality: earlier positions untouched
        assert not torch.equal(out[50:100], base[50:100])
        assert torch.equal(out[100:], base[100:])  # other document untouched
        far = x.clone()
        far[110] = (x[110] + 1) % EOT_ID  # block 0, same document as 200 in block 1
        out_far = model.logits(far, 1)
        assert torch.equal(out_far[128:], base[128:])  # W=1: block 1 does not see block 0
        out_wide = model.logits(far, 2)
        assert not torch.equal(out_wide[128:], model.logits(x, 2)[128:])  # W=2 does


@pytest.mark.slow
def test_long_and_short_masks_per_layer(perturbed_fp32, monkeypatch):
    seen = []
    real_attend = torch_attention.attend

    def recording_attend(q, k, v, mask, *scale):
        seen.append(int(mask.sum()))
        return real_attend(q, k, v, mask, *scale)

    monkeypatch.setattr(model_lib, "attend", recording_attend)
    x, _ = tokens(seq_len=512, eots=(0,))
    with torch.no_grad():
        perturbed_fp32.logits(x, 4)
    long_mask, short_mask = perturbed_fp32.attention_masks(x, 4)
    long_n, short_n = int(long_mask.sum()), int(short_mask.sum())
    assert long_n > short_n
    # Layers 0..11 without 7: long in 0, 4, 11.
    pattern = ["L", "S", "S", "S", "L", "S", "S", "S", "S", "S", "L"]
    assert seen == [long_n if p == "L" else short_n for p in pattern]


@pytest.mark.slow
def test_cpu_training_step_bf16_fp8():
    model = cast_embeddings_to_bf16(perturb(tiny_gpt(seed=2, fp8_grad_scale=2.0**29 * SEQ_LEN / 65536), seed=2))
    model.train()
    x, y = tokens(seed=2)
    loss = model(x, y, 3)
    loss.backward()
    assert torch.isfinite(loss) and loss.dtype == torch.float32
    for name, param in model.named_parameters():
        assert param.grad is not None, name
        assert param.grad.dtype == param.dtype, name  # bf16 grads for the tables, fp32 for the rest
        assert torch.isfinite(param.grad.float()).all(), name
    assert model.embed.weight.dtype == torch.bfloat16
    assert model.blocks[7].attn is None
    for i in NO_VALUE_EMBED_LAYERS:  # lambdas[1] multiplies nothing there
        assert model.blocks[i].attn.lambdas.grad[1] == 0, i
    for i in VALUE_EMBED_LAYERS:
        assert model.blocks[i].attn.lambdas.grad[1] != 0, i
    assert model.lm_head.weight.grad[VOCAB:].abs().sum() > 0  # padded classes take part in the softmax


@pytest.mark.slow
def test_fp32_policy_has_fp32_activations_and_gradients(perturbed_fp32):
    model = tiny_gpt(seed=1, fp8_head=False)
    model.load_state_dict(perturbed_fp32.state_dict())
    model.train()
    x, y = tokens()
    loss = model(x, y, 2)
    loss.backward()
    assert all(p.grad.dtype == torch.float32 for p in model.parameters())
    # Train mode without FP8 equals eval mode exactly (same plain head).
    with torch.no_grad():
        torch.testing.assert_close(loss, perturbed_fp32(x, y, 2), rtol=0, atol=0)


@pytest.mark.parametrize(
    "input_seq, target_seq, message",
    [
        (torch.zeros(200, dtype=torch.int32), torch.zeros(200, dtype=torch.int64), "multiple of 128"),
        (torch.zeros(2, 128, dtype=torch.int32), torch.zeros(2, 128, dtype=torch.int64), "1-D"),
        (torch.zeros(128), torch.zeros(128, dtype=torch.int64), "integer token ids"),
        (torch.zeros(128, dtype=torch.int32), torch.zeros(256, dtype=torch.int64), "target_seq shape"),
    ],
)
def test_bad_inputs_are_rejected(init_model, input_seq, target_seq, message):
    with pytest.raises(ValueError, match=message):
        init_model(input_seq, target_seq, 1)


def test_bad_constructor_arguments_are_rejected():
    with pytest.raises(ValueError, match="attention must be"):
        GPT(VOCAB, LAYERS, HEADS, DIM, attention="eager")
    with pytest.raises(ValueError, match="value_embed_slots"):
        GPT(VOCAB, 10, HEADS, DIM)


@pytest.mark.slow
def test_load_record_state_dict_strips_prefixes_and_casts():
    source = perturb(tiny_gpt(seed=4), seed=4)
    record_sd = {f"_orig_mod.{k}": v.bfloat16() for k, v in source.state_dict().items()}
    target = load_record_state_dict(tiny_gpt(seed=5), record_sd)
    for name, value in target.state_dict().items():
        assert value.dtype == torch.float32, name
        assert torch.equal(value, source.state_dict()[name].bfloat16().float()), name
    bf16_target = load_record_state_dict(cast_embeddings_to_bf16(tiny_gpt(seed=5)), record_sd)
    assert bf16_target.embed.weight.dtype == torch.bfloat16
    assert bf16_target.lm_head.weight.dtype == torch.float32


def test_load_record_state_dict_lists_bad_keys():
    state = {k: v.clone() for k, v in tiny_gpt().state_dict().items()}
    del state["blocks.3.lambdas"]
    state["blocks.7.attn.qkv_w"] = torch.zeros(3, DIM, DIM)
    state["skip_weights"] = torch.ones(5)
    with pytest.raises(ValueError) as error:
        load_record_state_dict(tiny_gpt(), state)
    text = str(error.value)
    assert "missing keys: ['blocks.3.lambdas']" in text
    assert "unexpected keys: ['blocks.7.attn.qkv_w']" in text
    assert "skip_weights: checkpoint (5,) vs model (6,)" in text


# --- RECORD.md section 11 points no other test pins down (docs/NUMERICS.md) --------------------


def _shifted_tokens(seed: int, eot_id: int, vocab: int, eot_positions=(0, 60, 130, 131)) -> tuple[np.ndarray, np.ndarray]:
    """(inputs, targets) of length SEQ_LEN cut from one stream, as the loaders do (targets = inputs shifted by 1)."""
    stream = np.random.default_rng(seed).integers(0, eot_id, size=SEQ_LEN + 1).astype(np.int32)
    stream[list(eot_positions)] = eot_id
    return stream[:-1], stream[1:]


def _small_torch_gpt(seed: int) -> GPT:
    torch.manual_seed(seed)
    gpt = GPT(1000, 12, 1, 32, attention="sdpa", fp8_head=False, rotary_max_len=SEQ_LEN, eot_id=999)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in gpt.named_parameters():
            noise = torch.randn(param.shape, generator=generator)
            param.copy_(noise if "embed" in name else 0.05 * noise + (1.0 if name.endswith("lambdas") else 0.0))
    return gpt


# 13: document ids come from the inputs


@pytest.mark.slow
def test_torch_ref_document_mask_comes_from_inputs_not_targets():
    gpt = _small_torch_gpt(0)
    inputs, targets = (torch.from_numpy(a) for a in _shifted_tokens(1, 999, 1000))
    with torch.no_grad():
        loss = gpt(inputs, targets.long(), 2)
        from_inputs = F.cross_entropy(torch_loss.soft_cap(gpt.logits(inputs, 2)), targets.long())
        from_targets = F.cross_entropy(torch_loss.soft_cap(gpt.logits(targets, 2)), targets.long())
    torch.testing.assert_close(loss, from_inputs, rtol=1e-6, atol=0)  # fp32: identical ops
    assert abs(float(from_targets - loss)) > 1e-3  # the other choice is visibly different


# 6: attention scale 0.12


def test_torch_ref_attention_uses_scale_0_12():
    generator = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(1, 2, 64, 128, generator=generator) for _ in range(3))
    causal = torch.ones(64, 64, dtype=torch.bool).tril()
    got = torch_attention.attend(q, k, v, causal).double()
    scores = (q.double() @ k.double().mT) * 0.12
    want = scores.masked_fill(~causal, -math.inf).softmax(-1) @ v.double()
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)  # fp32 SDPA vs float64
    default = (q.double() @ k.double().mT) / math.sqrt(128)
    other = default.masked_fill(~causal, -math.inf).softmax(-1) @ v.double()
    assert (got - other).abs().max() > 1e-2  # 1/sqrt(128) would be clearly different


def test_model_dims_are_inferred_from_a_state_dict():
    state = GPT(50257, 12, 2, 64, rotary_max_len=128).state_dict()
    base = get_preset("tiny").model
    got = model_config_from_state_dict(base, state, head_dim=32)
    assert (got.vocab_size, got.model_dim, got.num_layers, got.num_heads) == (50257, 64, 12, 2)
    assert got.attention_free_layers == (7,)
    with pytest.raises(ValueError, match="not divisible by --head-dim"):
        model_config_from_state_dict(base, state, head_dim=48)
