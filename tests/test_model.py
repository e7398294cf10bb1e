"""jaxgpt.model: parameter tree, init, numerics of each piece, and whole-model properties."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import optax
import pytest
from flax import nnx

from jaxgpt import layers as layers_lib
from jaxgpt import loss as loss_lib
from jaxgpt import masks
from jaxgpt import model as M
from jaxgpt import params as params_lib
from jaxgpt import rotary as rotary_lib
from jaxgpt.config import ModelConfig, replace

# A small vocabulary keeps the (T, Vp) logits cheap; tests about the real vocabulary use FULL_VOCAB.
TINY = ModelConfig(num_heads=2, model_dim=128, dtype_policy="fp32", attention_backend="dense", max_window_blocks=4,
                   vocab_size=2000, eot_id=1999)
FULL_VOCAB = replace(TINY, vocab_size=50257, eot_id=50256)
# Four layers keep every per-layer pattern (value embedding / none, attention-free layer, long
# and short windows, U-net skips) at a third of the compile time of twelve.
SHALLOW = replace(TINY, num_layers=4, value_embed_slots=(0, None, None, 0), long_window_layers=(0, 3),
                  attention_free_layers=(2,))

# Shared compiled functions (window traced, so one compilation serves every window).
_logits = nnx.jit(lambda model, ids, window: model.logits(ids, window))
_loss = nnx.jit(lambda model, ids, window: model(ids, ids, window))
SEQ = 256
LN_VP = math.log(50304)


def _randomize(model: M.GPT, seed: int, scale: float = 0.05) -> None:
    """Give every parameter random values so that zero-initialised paths carry signal too."""
    params = params_lib.param_dict(model)
    keys = jax.random.split(jax.random.key(seed), len(params))
    new = {}
    for key, (name, value) in zip(keys, sorted(params.items())):
        noise = jax.random.normal(key, value.shape, jnp.float32)
        base = 1.0 if "embed" in name else scale
        new[name] = (noise * base + (1.0 if name.endswith("lambdas") or name == "skip_weights" else 0.0))
    params_lib.load_param_dict(model, new)


def _tokens(seed: int, batch: int = 1, seq: int = SEQ, eot_every: int | None = 97) -> jax.Array:
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, TINY.eot_id, size=(batch, seq), dtype=np.int32)
    if eot_every:
        ids[:, ::eot_every] = TINY.eot_id
    return jnp.asarray(ids)


@pytest.fixture(scope="module")
def random_fp32_model() -> M.GPT:
    model = M.GPT(SHALLOW, rngs=nnx.Rngs(0))
    _randomize(model, seed=1)
    return model


# --- parameter tree --------------------------------------------------------------------------


def test_record_preset_parameter_count_and_shapes():
    shapes = params_lib.param_shapes(ModelConfig())  # nnx.eval_shape: nothing is allocated
    assert sum(math.prod(s.shape) for s in shapes.values()) == 275_598_388
    assert shapes["embed.weight"].shape == (50257, 768)
    assert shapes["embed.weight"].dtype == jnp.bfloat16  # the record keeps no fp32 embedding master
    for k in range(3):
        assert shapes[f"value_embeds.embed.{k}.weight"].shape == (50257, 768)
    assert shapes["blocks.0.attn.qkv_w"].shape == (3, 768, 768)
    assert shapes["blocks.0.attn.c_proj.weight"].shape == (768, 768)
    assert shapes["blocks.0.mlp.c_fc.weight"].shape == (3072, 768)
    assert shapes["blocks.0.mlp.c_proj.weight"].shape == (768, 3072)
    assert shapes["skip_weights"].shape == (6,)
    assert shapes["lm_head.weight"].shape == (50304, 768)
    assert shapes["lm_head.weight"].dtype == jnp.float32
    muon = sum(math.prod(s.shape) for n, s in shapes.items() if n.startswith("blocks.") and len(s.shape) >= 2)
    assert muon == 82_575_360


def test_parameter_names_follow_record_keys():
    names = set(params_lib.param_shapes(TINY))
    expected = {"embed.weight", "skip_weights", "lm_head.weight"} | {f"value_embeds.embed.{k}.weight" for k in range(3)}
    for i in range(12):
        expected |= {f"blocks.{i}.lambdas", f"blocks.{i}.mlp.c_fc.weight", f"blocks.{i}.mlp.c_proj.weight"}
        if i != 7:  # block 7 has no attention at all
            expected |= {f"blocks.{i}.attn.qkv_w", f"blocks.{i}.attn.lambdas", f"blocks.{i}.attn.c_proj.weight"}
    assert names == expected


def test_policy_dtypes():
    record = params_lib.param_shapes(replace(TINY, dtype_policy="record"))
    fp32 = params_lib.param_shapes(TINY)
    for name, shape in record.items():
        want = jnp.bfloat16 if "embed" in name else jnp.float32
        assert shape.dtype == want, name
        assert fp32[name].dtype == jnp.float32, name


def test_init_statistics():
    config = replace(TINY, dtype_policy="record")
    params = params_lib.param_dict(M.GPT(config, rngs=nnx.Rngs(3)))
    bound = math.sqrt(3) * 0.5 / math.sqrt(128)
    for name, value in params.items():
        value = np.asarray(value, np.float32)
        if "embed" in name:
            # N(0,1): sample mean and std within 6 standard errors (1/sqrt(n), 1/sqrt(2n)).
            n = value.size
            assert abs(value.mean()) < 6 / math.sqrt(n) and abs(value.std() - 1) < 6 / math.sqrt(2 * n), name
        elif name.endswith("qkv_w") or name.endswith("c_fc.weight"):
            assert np.abs(value).max() <= bound, name
            assert np.abs(value).max() > 0.99 * bound, name  # fills the interval
            assert abs(value.std() - bound / math.sqrt(3)) < 0.02 * bound, name  # U(-b,b) std = b/sqrt(3)
        elif name.endswith("c_proj.weight") or name == "lm_head.weight":
            assert not value.any(), name
        elif name.endswith("attn.lambdas"):
            np.testing.assert_array_equal(value, [0.5, 0.5])
        elif name.endswith("lambdas"):
            np.testing.assert_array_equal(value, [1.0, 0.0])
        elif name == "skip_weights":
            np.testing.assert_array_equal(value, np.ones(6))
        else:
            raise AssertionError(f"untested parameter {name}")


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["fp32", "record"])
def test_init_logits_cap_to_15_and_loss_is_log_vp(policy):
    config = replace(FULL_VOCAB, dtype_policy=policy, num_layers=4, value_embed_slots=SHALLOW.value_embed_slots,
                     long_window_layers=SHALLOW.long_window_layers, attention_free_layers=SHALLOW.attention_free_layers)
    model = M.GPT(config, rngs=nnx.Rngs(0))
    ids = _tokens(0)

    @nnx.jit
    def capped_and_loss(model, ids):  # both heads in one program: XLA shares the trunk
        return [(loss_lib.soft_cap(model.logits(ids, 2, train=train), 30.0, 7.5), model(ids, ids, 2, train=train))
                for train in (False, True)]

    for capped, loss in capped_and_loss(model, ids):
        assert capped.shape == (1, SEQ, 50304)
        np.testing.assert_array_equal(np.asarray(capped), 15.0)  # zero head -> 30*sigmoid(0) exactly
        assert loss.dtype == jnp.float32
        np.testing.assert_allclose(float(loss), LN_VP, rtol=1e-6)  # uniform softmax, fp32 log-sum-exp


def test_load_param_dict_lists_every_problem(random_fp32_model):
    params = dict(params_lib.param_dict(random_fp32_model))
    params.pop("skip_weights")
    params["blocks.2.attn.qkv_w"] = params["blocks.0.attn.qkv_w"]
    params["lm_head.weight"] = params["lm_head.weight"][:-1]
    model = M.GPT(SHALLOW, rngs=nnx.Rngs(0))
    with pytest.raises(ValueError) as err:
        params_lib.load_param_dict(model, params)
    for fragment in ("skip_weights", "blocks.2.attn.qkv_w", "lm_head.weight: got (2047, 128)"):
        assert fragment in str(err.value)


def test_param_dict_round_trip(random_fp32_model):
    params = params_lib.param_dict(random_fp32_model)
    model = M.GPT(SHALLOW, rngs=nnx.Rngs(5))
    params_lib.load_param_dict(model, params)
    for name, value in params_lib.param_dict(model).items():
        np.testing.assert_array_equal(np.asarray(value), np.asarray(params[name]), err_msg=name)


# --- pieces ----------------------------------------------------------------------------------


def test_rotary_tables():
    cos, sin = rotary_lib.rotary_tables(16, 300)
    assert cos.shape == sin.shape == (300, 8) and cos.dtype == np.float32
    freq = (np.float32(1 / 1024) ** np.linspace(0, 1, 4, dtype=np.float32)).astype(np.float32)
    np.testing.assert_allclose(freq, [1, 1024 ** (-1 / 3), 1024 ** (-2 / 3), 1 / 1024], rtol=1e-6)  # fp32 pow
    theta = np.arange(300, dtype=np.float32)[:, None] * freq
    np.testing.assert_allclose(cos[:, :4], np.cos(theta), atol=1e-6)  # fp32 cos, a few ulp across libms
    np.testing.assert_allclose(sin[:, :4], np.sin(theta), atol=1e-6)
    assert (cos[:, 4:] == 1).all() and (sin[:, 4:] == 0).all()  # zero-frequency half


def test_rotary_sign_and_half_split_against_hand_formula():
    head_dim, seq = 8, 5
    x = np.random.default_rng(0).standard_normal((1, seq, 2, head_dim)).astype(np.float32)
    cos, sin = rotary_lib.rotary_tables(head_dim, seq)
    got = np.asarray(rotary_lib.apply_rotary(jnp.asarray(x), jnp.asarray(cos), jnp.asarray(sin)))
    want = np.empty_like(x)
    for t in range(seq):
        for j in range(head_dim // 2):  # dim j pairs with dim j + head_dim/2
            c, s = cos[t, j], sin[t, j]
            a, b = x[0, t, :, j], x[0, t, :, j + head_dim // 2]
            want[0, t, :, j] = a * c + b * s  # the record's sign: rotation by -theta
            want[0, t, :, j + head_dim // 2] = -a * s + b * c
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)  # same fp32 ops, order may differ
    # Dims of zero frequency pass through unchanged.
    np.testing.assert_array_equal(got[..., 2:4], x[..., 2:4])
    np.testing.assert_array_equal(got[..., 6:8], x[..., 6:8])


def test_rotary_keeps_bf16():
    x = jnp.ones((1, 4, 1, 8), jnp.bfloat16)
    cos, sin = rotary_lib.rotary_tables(8, 4)
    assert rotary_lib.apply_rotary(x, jnp.asarray(cos), jnp.asarray(sin)).dtype == jnp.bfloat16


def test_rms_norm_uses_fp32_machine_epsilon():
    x = np.full((1, 4), 3e-4, np.float32)  # mean(x^2) = 9e-8, comparable to eps = 1.19e-7
    got = np.asarray(layers_lib.norm(jnp.asarray(x)))
    want = x / np.sqrt(9e-8 + 2.0**-23)
    np.testing.assert_allclose(got, want, rtol=1e-6)  # fp32 rsqrt
    assert not np.allclose(got, x / np.sqrt(9e-8 + 1e-6), rtol=1e-2)  # flax's default eps would differ


def test_rms_norm_bf16_computes_in_fp32():
    x = jax.random.normal(jax.random.key(0), (4, 128), jnp.float32).astype(jnp.bfloat16)
    got = layers_lib.norm(x)
    assert got.dtype == jnp.bfloat16
    x32 = np.asarray(x, np.float32)
    want = (x32 / np.sqrt((x32**2).mean(-1, keepdims=True) + 2.0**-23)).astype(ml_dtypes.bfloat16)
    # one bf16 rounding of an fp32 result; an ulp apart at most where fp32 lands on a tie.
    np.testing.assert_allclose(np.asarray(got, np.float32), want.astype(np.float32), rtol=2**-7)


# --- embedding -------------------------------------------------------------------------------


def test_embedding_gradient_sums_in_fp32_and_rounds_once():
    """RECORD.md 11.9: a bf16 table's gradient is each id's rows summed in fp32, rounded to bf16
    once. With one id taking most positions (as frequent tokens do in a real batch) a bf16
    running sum would be visibly off; the result must equal the fp64 sum rounded to bf16 up to
    fp32 summation order (|diff| <= 1 bf16 ulp of the entry)."""
    rng = np.random.default_rng(0)
    ids = np.where(rng.random((4, 512)) < 0.75, 3, rng.integers(0, 40, (4, 512))).astype(np.int32)
    table = jnp.asarray(rng.normal(size=(40, 16)), jnp.bfloat16)
    # bf16-valued cotangents: the gradient reaching a bf16 lookup's output is bf16.
    cotangent = rng.normal(size=(4, 512, 16)).astype(ml_dtypes.bfloat16).astype(np.float32)
    grad = jax.grad(lambda t: jnp.vdot(layers_lib.embedding_lookup(t, ids).astype(jnp.float32), cotangent))(table)
    assert grad.dtype == jnp.bfloat16
    exact = np.zeros((40, 16))
    np.add.at(exact, ids.reshape(-1), cotangent.reshape(-1, 16).astype(np.float64))
    once = exact.astype(ml_dtypes.bfloat16).astype(np.float64)
    ulp = np.abs(once) * 2.0**-7 + 1e-30
    assert np.all(np.abs(np.asarray(grad, np.float64) - once) <= ulp)
    # What the fp32 accumulation guards against: a bf16 running sum of the same rows.
    running = np.zeros(16, ml_dtypes.bfloat16)
    for row in cotangent.reshape(-1, 16)[ids.reshape(-1) == 3]:
        running = (running.astype(np.float32) + row).astype(ml_dtypes.bfloat16)
    assert np.max(np.abs(running.astype(np.float64) - exact[3])) > 4 * np.max(ulp[3])
    # Forward: plain rows; unseen ids get exactly zero gradient.
    np.testing.assert_array_equal(np.asarray(layers_lib.embedding_lookup(table, ids)), np.asarray(table)[ids])
    unseen = np.setdiff1d(np.arange(40), ids)
    assert np.all(np.asarray(grad, np.float32)[unseen] == 0)


# --- loss ------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("chunk", [64, 100])  # 100 leaves a 56-token remainder of 256
def test_chunked_cross_entropy_equals_unchunked(chunk):
    """The plain head's chunks (autodiff with jax.checkpoint); the FP8 head's fused chunks are
    tests/test_fp8.py's."""
    k1, k2, k3 = jax.random.split(jax.random.key(7), 3)
    x = jax.random.normal(k1, (256, 64), jnp.float32)
    w = 0.3 * jax.random.normal(k2, (384, 64), jnp.float32)
    targets = jax.random.randint(k3, (256,), 0, 384)

    def loss(x, w, chunk_tokens):
        return loss_lib.head_loss(x, w, targets, use_fp8=False, cap=30.0, temperature=7.5, chunk_tokens=chunk_tokens)

    value_and_grad = jax.jit(jax.value_and_grad(loss, argnums=(0, 1)), static_argnums=2)
    full, (gx_full, gw_full) = value_and_grad(x, w, None)
    part, (gx_part, gw_part) = value_and_grad(x, w, chunk)
    np.testing.assert_allclose(float(part), float(full), rtol=1e-6)  # fp32 sums in a different order
    # Gradients are sums of cancelling terms, so fp32 reassociation error scales with the largest
    # entry, not each entry: atol = 1e-5 of the max.
    np.testing.assert_allclose(np.asarray(gx_part), np.asarray(gx_full), rtol=1e-5,
                               atol=1e-5 * np.abs(np.asarray(gx_full)).max())
    np.testing.assert_allclose(np.asarray(gw_part), np.asarray(gw_full), rtol=1e-5,
                               atol=1e-5 * np.abs(np.asarray(gw_full)).max())


def test_capped_cross_entropy_matches_optax_to_fp32_rounding():
    """The cap shift, the select-picked target and the recomputing backward change the loss and
    its fp32 gradient only at fp32 rounding; the bf16 gradient is rounded once, so it equals
    optax's max-shifted one except where that rounding falls on a bf16 tie side (one ulp)."""
    k1, k2 = jax.random.split(jax.random.key(3))
    logits = (8 * jax.random.normal(k1, (64, 384), jnp.float32)).astype(jnp.bfloat16)
    targets = jax.random.randint(k2, (64,), 0, 384)

    def with_optax(z):
        capped = loss_lib.soft_cap(z, 30.0, 7.5)
        return optax.softmax_cross_entropy_with_integer_labels(capped, targets).sum()

    ours = jax.jit(jax.value_and_grad(lambda z: loss_lib.capped_cross_entropy(z, targets, cap=30.0, temperature=7.5)))
    (loss, grad), (want, want_grad) = ours(logits), jax.jit(jax.value_and_grad(with_optax))(logits)
    # fp32 sums of 64 x 384 terms, shifted differently: a few ulps of the total.
    np.testing.assert_allclose(float(loss), float(want), rtol=1e-6)
    grad, want_grad = np.asarray(grad, np.float32), np.asarray(want_grad, np.float32)
    ulp = np.abs(want_grad) * 2.0**-7  # one bf16 ulp is at most 2^-7 of the value
    assert np.all(np.abs(grad - want_grad) <= ulp)
    assert np.mean(grad != want_grad) < 1e-3, np.mean(grad != want_grad)  # 1 of 24,576 here
    assert np.count_nonzero(grad) > 0.9 * grad.size


def test_capped_cross_entropy_refuses_a_cap_beyond_its_shift():
    with pytest.raises(ValueError, match="soft-cap 60.0 outside"):
        loss_lib.capped_cross_entropy(jnp.zeros((2, 8)), jnp.zeros((2,), jnp.int32), cap=60.0, temperature=7.5)


@pytest.mark.slow
def test_cross_entropy_counts_padded_classes():
    # Zero logits: every one of the Vp classes contributes to log-sum-exp, padded ones included.
    x = jnp.ones((4, 8), jnp.float32)
    loss = loss_lib.head_loss(x, jnp.zeros((50304, 8)), jnp.zeros((4,), jnp.int32), use_fp8=False, cap=30.0, temperature=7.5)
    np.testing.assert_allclose(float(loss), LN_VP, rtol=1e-6)  # fp32 log-sum-exp


@pytest.mark.slow
def test_model_chunked_loss_equals_unchunked(random_fp32_model):
    ids = _tokens(3)
    chunked = M.GPT(replace(SHALLOW, loss_chunk_tokens=96), rngs=nnx.Rngs(0))
    params_lib.load_param_dict(chunked, params_lib.param_dict(random_fp32_model))
    full = _loss(random_fp32_model, ids, 2)
    part = _loss(chunked, ids, 2)
    np.testing.assert_allclose(float(part), float(full), rtol=1e-6)  # fp32 sum order only


# --- whole model -----------------------------------------------------------------------------


@pytest.mark.slow
def test_causality_no_gradient_from_future_tokens(random_fp32_model):
    # Distinct token ids, so each embedding row belongs to exactly one position.
    ids = jnp.asarray(np.random.default_rng(0).permutation(TINY.eot_id)[:SEQ][None].astype(np.int32))
    position = 150
    graphdef, params, rest = nnx.split(random_fp32_model, nnx.Param, ...)

    def logit_sum_at(params):
        model = nnx.merge(graphdef, params, rest)
        return model.logits(ids, 4)[0, position].sum()  # window 4 blocks = all 256 positions

    grads = jax.jit(jax.grad(logit_sum_at))(params)
    rows = np.asarray(ids[0])
    for table in ("embed", "value_embeds.embed.0"):
        grad = grads["embed"]["weight"] if table == "embed" else grads["value_embeds"]["embed"][0]["weight"]
        grad = np.abs(np.asarray(grad[...]))[rows].sum(-1)
        assert (grad[position + 1:] == 0).all(), f"{table}: future positions leak into position {position}"
        # Within the 4-block window (positions >= 0 here), past positions do get gradient.
        assert (grad[: position + 1] > 0).all(), table


def test_future_tokens_do_not_change_past_logits(random_fp32_model):
    ids = _tokens(4)
    changed = ids.at[0, 200:].set(_tokens(5)[0, 200:])
    before, after = _logits(random_fp32_model, ids, 3), _logits(random_fp32_model, changed, 3)
    np.testing.assert_array_equal(np.asarray(before[0, :200]), np.asarray(after[0, :200]))
    assert np.abs(np.asarray(before[0, 200:]) - np.asarray(after[0, 200:])).max() > 1e-3


@pytest.mark.slow
def test_jit_equals_eager(random_fp32_model):
    ids = _tokens(6, seq=128)
    eager = random_fp32_model(ids, ids, 3)
    jitted = _loss(random_fp32_model, ids, jnp.int32(3))  # traced window
    np.testing.assert_allclose(float(jitted), float(eager), rtol=1e-6)  # fp32, XLA fusion may reorder


def test_batch_rows_are_independent(random_fp32_model):
    ids = _tokens(8, batch=2)
    both = _logits(random_fp32_model, ids, 2)
    first = _logits(random_fp32_model, ids[:1], 2)
    np.testing.assert_allclose(np.asarray(both[:1]), np.asarray(first), rtol=1e-5, atol=1e-5)  # fp32


@pytest.mark.slow
def test_record_policy_dtypes_and_train_head_differs():
    model = M.GPT(replace(SHALLOW, dtype_policy="record"), rngs=nnx.Rngs(0))
    _randomize(model, seed=2)
    ids = _tokens(9)

    @nnx.jit
    def both_heads(model, ids):
        return model.logits(ids, 2, train=False), model.logits(ids, 2, train=True), model.hidden(ids, 2)

    eval_logits, train_logits, hidden = both_heads(model, ids)
    assert eval_logits.dtype == train_logits.dtype == hidden.dtype == jnp.bfloat16
    diff = np.abs(np.asarray(eval_logits, np.float32) - np.asarray(train_logits, np.float32))
    # FP8 (3 mantissa bits) vs bf16 head: visibly different, but the same logits to ~2^-4 relative.
    scale = np.abs(np.asarray(eval_logits, np.float32)).max()
    assert 0 < diff.max() < 0.15 * scale


@pytest.mark.parametrize(
    "ids, message",
    [
        (jnp.zeros((256,), jnp.int32), "(B, T)"),
        (jnp.zeros((1, 200), jnp.int32), "multiple of 128"),
        (jnp.zeros((1, 256), jnp.float32), "integers"),
    ],
)
def test_bad_inputs_raise(random_fp32_model, ids, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        random_fp32_model.logits(ids, 2)


def test_mismatched_targets_raise(random_fp32_model):
    ids = _tokens(0)
    with pytest.raises(ValueError, match="target_ids shape"):
        random_fp32_model(ids, ids[:, :128], 2)



# --- rematerialisation -------------------------------------------------------------------------


def _flat_grads(grads) -> dict[str, np.ndarray]:
    return {params_lib.path_to_name(path): np.asarray(var.get_value()) for path, var in nnx.to_flat_state(grads)}


@pytest.mark.slow
def test_remat_gives_the_same_loss_and_gradients(random_fp32_model):
    ids = _tokens(5)
    params = params_lib.param_dict(random_fp32_model)
    models = {}
    for policy in ("none", "block", "block_dots"):
        models[policy] = M.GPT(replace(SHALLOW, remat=policy), rngs=nnx.Rngs(0))
        params_lib.load_param_dict(models[policy], params)
    traced = nnx.jit(nnx.value_and_grad(lambda model, window: model(ids, ids, window)))
    for window in (jnp.int32(3), 1):  # a traced and a Python-int window take different paths
        if isinstance(window, int):
            step = nnx.jit(nnx.value_and_grad(lambda model: model(ids, ids, window)))
            results = {policy: step(model) for policy, model in models.items()}
        else:
            results = {policy: traced(model, window) for policy, model in models.items()}
        ref_loss, ref_grads = results.pop("none")  # computed once, compared with both remat policies
        ref_flat = _flat_grads(ref_grads)
        for remat, (loss, grads) in results.items():
            # Remat recomputes the same fp32 ops; only XLA's fusion order may differ (fp32 rounding).
            np.testing.assert_allclose(float(loss), float(ref_loss), rtol=1e-6, err_msg=remat)
            flat = _flat_grads(grads)
            assert flat.keys() == ref_flat.keys()
            for name, ref in ref_flat.items():
                # fp32 gradients through 4 layers: fusion-order differences stay at fp32 rounding.
                np.testing.assert_allclose(flat[name], ref, rtol=1e-5, atol=1e-7, err_msg=f"{remat} {name}")


# --- RECORD.md section 11 points no other test pins down (docs/NUMERICS.md) --------------------

# Layer 1 has attention but no value embedding; layer 2 has no attention (RECORD.md layer patterns).
NUMERICS_SHALLOW = replace(
    ModelConfig(num_heads=2, model_dim=64, dtype_policy="fp32", attention_backend="dense", max_window_blocks=4,
                vocab_size=2000, eot_id=1999),
    num_layers=4, value_embed_slots=(0, None, None, 0), long_window_layers=(0, 3), attention_free_layers=(2,),
)


def _random_numerics_model(seed: int) -> M.GPT:
    """A NUMERICS_SHALLOW fp32 model whose every parameter is random, so zero-initialised paths carry signal."""
    model = M.GPT(NUMERICS_SHALLOW, rngs=nnx.Rngs(seed))
    params = params_lib.param_dict(model)
    keys = jax.random.split(jax.random.key(seed + 1), len(params))
    new = {}
    for key, (name, value) in zip(keys, sorted(params.items())):
        noise = jax.random.normal(key, value.shape, jnp.float32)
        offset = 1.0 if name.endswith("lambdas") or name == "skip_weights" else 0.0
        new[name] = noise * (1.0 if "embed" in name else 0.05) + offset
    params_lib.load_param_dict(model, new)
    return model


def _shifted_tokens(seed: int, eot_id: int, vocab: int, eot_positions=(0, 60, 130, 131)) -> tuple[np.ndarray, np.ndarray]:
    """(inputs, targets) of length SEQ cut from one stream, as the loaders do (targets = inputs shifted by 1)."""
    stream = np.random.default_rng(seed).integers(0, eot_id, size=SEQ + 1).astype(np.int32)
    stream[list(eot_positions)] = eot_id
    return stream[:-1], stream[1:]


# 13: document ids come from the inputs


@pytest.mark.slow  # two compilations of the 4-layer model
def test_jaxgpt_document_mask_comes_from_inputs_not_targets():
    model = _random_numerics_model(0)
    inputs, targets = _shifted_tokens(0, NUMERICS_SHALLOW.eot_id, NUMERICS_SHALLOW.vocab_size)
    # The two candidate masks really differ for this stream (otherwise the test proves nothing).
    assert not np.array_equal(np.asarray(masks.document_ids(jnp.asarray(inputs), NUMERICS_SHALLOW.eot_id)),
                              np.asarray(masks.document_ids(jnp.asarray(targets), NUMERICS_SHALLOW.eot_id)))
    ids, tgt = jnp.asarray(inputs)[None], jnp.asarray(targets)[None]
    loss = float(nnx.jit(lambda m, x, y: m(x, y, 2))(model, ids, tgt))
    logits = nnx.jit(lambda m, x: m.logits(x, 2))  # one compilation for both token streams
    # logits() sees the inputs only: the loss built from it is the loss with input document ids.
    capped = loss_lib.soft_cap(logits(model, ids), 30.0, 7.5)[0]
    from_inputs = float(optax.softmax_cross_entropy_with_integer_labels(capped, tgt[0]).mean())
    capped_t = loss_lib.soft_cap(logits(model, tgt), 30.0, 7.5)[0]
    np.testing.assert_allclose(loss, from_inputs, rtol=1e-6)  # fp32: same ops, sum order may differ
    # Feeding the targets through the trunk gives a clearly different loss (teeth for the check above).
    from_targets = float(optax.softmax_cross_entropy_with_integer_labels(capped_t, tgt[0]).mean())
    assert abs(from_targets - loss) > 1e-3


# 14: parameters without signal and padded head rows


@pytest.mark.slow
def test_jaxgpt_gradients_of_silent_lambda_and_padded_head_rows():
    model = _random_numerics_model(2)
    inputs, targets = _shifted_tokens(2, NUMERICS_SHALLOW.eot_id, NUMERICS_SHALLOW.vocab_size)
    grads = nnx.jit(lambda m, x, y: nnx.grad(lambda mm: mm(x, y, 2))(m))(
        model, jnp.asarray(inputs)[None], jnp.asarray(targets)[None])
    flat = {params_lib.path_to_name(path): np.asarray(v.get_value()) for path, v in nnx.to_flat_state(grads)}
    # lambdas[1] scales the value embedding; in layer 1 there is none, so its gradient is exactly 0.
    assert flat["blocks.1.attn.lambdas"][1] == 0.0
    assert flat["blocks.1.attn.lambdas"][0] != 0.0
    for layer in (0, 3):  # layers with a value embedding: lambdas[1] does get signal
        assert flat[f"blocks.{layer}.attn.lambdas"][1] != 0.0, layer
    head = flat["lm_head.weight"]
    assert head.shape[0] > NUMERICS_SHALLOW.vocab_size  # padded to a multiple of 128
    # Padded classes sit in the softmax, so their rows get p * x != 0 (never exactly 0).
    assert (np.abs(head[NUMERICS_SHALLOW.vocab_size:]).sum(axis=1) > 0).all()


# 5: rotary tables are fp32 products t * freq


def test_jaxgpt_rotary_arguments_are_fp32_products_at_large_positions():
    head_dim, max_len = 16, 65536
    cos, sin = rotary_lib.rotary_tables(head_dim, max_len)
    quarter = head_dim // 4
    freq = (np.float32(1 / 1024) ** np.linspace(0, 1, quarter, dtype=np.float32)).astype(np.float32)
    t = np.arange(max_len - 512, max_len, dtype=np.float32)
    theta32 = t[:, None] * freq  # rounded to fp32, as the record's outer product
    theta64 = t.astype(np.float64)[:, None] * freq.astype(np.float64)
    got_cos, got_sin = cos[max_len - 512:, :quarter], sin[max_len - 512:, :quarter]
    # cos/sin of fp32 arguments ~6.5e4 differ across libms by a few ulp of the result: 1e-5 absolute.
    np.testing.assert_allclose(got_cos, np.cos(theta32.astype(np.float64)), atol=1e-5)
    np.testing.assert_allclose(got_sin, np.sin(theta32.astype(np.float64)), atol=1e-5)
    # A float64 product is off by up to half an fp32 ulp of theta (~2e-3 rad here): far outside 1e-5.
    assert np.abs(got_cos - np.cos(theta64)).max() > 1e-4
