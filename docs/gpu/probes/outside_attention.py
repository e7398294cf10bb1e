"""One-off: where do jaxgpt's ~240 ms outside attention go on one H100? (not committed)"""
import time
import numpy as np, jax, jax.numpy as jnp
from jaxgpt import config as cfg, train, model as model_lib

def bench(fn, *args, n=5):
    out = fn(*args); jax.block_until_ready(out)
    ts = []
    for _ in range(n):
        t = time.perf_counter(); out = fn(*args); jax.block_until_ready(out); ts.append(time.perf_counter() - t)
    return 1e3 * float(np.median(ts))

rng = np.random.default_rng(0)
toks = rng.integers(0, 50256, size=(1, 65537)).astype(np.int32)
toks[0, rng.choice(65537, 64, replace=False)] = 50256
i1, t1 = jnp.asarray(toks[:, :-1]), jnp.asarray(toks[:, 1:])
real_attention = model_lib.attention_lib.attention

def loss_grad_ms(model_overrides, train_flag=True, cheap_attention=True):
    preset = cfg.get_preset("record")
    preset = cfg.replace(preset, model=cfg.replace(preset.model, **model_overrides))
    _, graph, host = train.build_model(preset, train.RunOptions(), num_devices=1)
    p = jax.tree.map(jnp.asarray, host)
    model_lib.attention_lib.attention = (lambda q, k, v, *a, **kw: v) if cheap_attention else real_attention
    fn = jax.jit(jax.value_and_grad(lambda p, i, t: graph.bind(p)(i, t, np.int32(14), train=train_flag)))
    try:
        return bench(fn, p, i1, t1)
    finally:
        model_lib.attention_lib.attention = real_attention

print(f"no attention, chunk 8192, fp8 head: {loss_grad_ms({}):.1f} ms", flush=True)
print(f"no attention, no chunking, fp8 head: {loss_grad_ms({'loss_chunk_tokens': None}):.1f} ms", flush=True)
print(f"no attention, chunk 8192, bf16 head (train=False): {loss_grad_ms({}, train_flag=False):.1f} ms", flush=True)
print(f"no attention, remat=block: {loss_grad_ms({'remat': 'block'}):.1f} ms", flush=True)
x = jax.random.normal(jax.random.key(1), (65536, 768), jnp.bfloat16)
w = jax.random.normal(jax.random.key(2), (50304, 768), jnp.float32) * 0.02
for chunk in (8192, None):
    for fp8 in (True, False):
        f = jax.jit(jax.value_and_grad(lambda x, w: model_lib.head_loss(x, w, t1.reshape(-1), use_fp8=fp8, cap=30.0, temperature=7.5, chunk_tokens=chunk), argnums=(0, 1)))
        print(f"head_loss alone chunk={chunk} fp8={fp8}: {bench(f, x, w):.1f} ms", flush=True)
mlp_in = jax.random.normal(jax.random.key(3), (1, 65536, 768), jnp.bfloat16)
wf = jax.random.normal(jax.random.key(4), (3072, 768), jnp.float32) * 0.02
wp = jax.random.normal(jax.random.key(5), (768, 3072), jnp.float32) * 0.02
f = jax.jit(jax.value_and_grad(lambda x, a, b: model_lib.linear(model_lib.relu_squared(model_lib.linear(x, a)), b).astype(jnp.float32).sum(), argnums=(0, 1, 2)))
print(f"one MLP fwd+bwd: {bench(f, mlp_in, wf, wp):.1f} ms", flush=True)
f = jax.jit(jax.value_and_grad(lambda x: model_lib.norm(x).astype(jnp.float32).sum()))
print(f"one rms_norm fwd+bwd (65536x768 bf16): {bench(f, mlp_in):.2f} ms", flush=True)
