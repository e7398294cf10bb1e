"""One-off GPU smoke of the Pallas kernel (not committed)."""
import sys, time, numpy as np, jax, jax.numpy as jnp
from jaxgpt import attention, masks
from jaxgpt.kernels.flash_attention import flash_attention, Tiles

def bench(fn, *a, n=10):
    jax.block_until_ready(fn(*a)); ts = []
    for _ in range(n):
        t = time.perf_counter(); jax.block_until_ready(fn(*a)); ts.append(time.perf_counter() - t)
    return 1e3 * float(np.median(ts))

rng = np.random.default_rng(0)
def case(T):
    toks = rng.integers(0, 50000, size=(1, T)); toks[0, rng.choice(T, T // 1000, replace=False)] = 50256
    ids = masks.document_ids(jnp.asarray(toks))
    q, k, v = (jnp.asarray(rng.standard_normal((1, T, 6, 128)), jnp.bfloat16) for _ in range(3))
    return ids, q, k, v
ids, q, k, v = case(8192)
for w in (1, 7, 14):
    out = flash_attention(q, k, v, ids, w)
    ref = attention.dense_attention(q, k, v, ids, w)
    err = float(jnp.abs(out.astype(jnp.float32) - ref.astype(jnp.float32)).max())
    loss = lambda fn: jax.grad(lambda q, k, v: (fn(q, k, v).astype(jnp.float32) * jnp.cos(jnp.arange(8192.0))[None, :, None, None]).sum(), argnums=(0, 1, 2))(q, k, v)
    g = loss(lambda q, k, v: flash_attention(q, k, v, ids, w)); gr = loss(lambda q, k, v: attention.dense_attention(q, k, v, ids, w))
    print(f"T=8192 W={w}: out max abs {err:.3g}; grad rel", [f"{float(jnp.abs(a.astype(jnp.float32) - b.astype(jnp.float32)).max() / jnp.abs(b.astype(jnp.float32)).max()):.3g}" for a, b in zip(g, gr)], flush=True)
ids, q, k, v = case(65536)
for w in (1, 14):
    for name, fn in (("pallas", lambda q, k, v, w: flash_attention(q, k, v, ids, w)), ("blocked", lambda q, k, v, w: attention.blocked_attention(q, k, v, ids, w))):
        f = jax.jit(fn); fb = jax.jit(jax.grad(lambda q, k, v, w: fn(q, k, v, w).astype(jnp.float32).sum(), argnums=(0, 1, 2)))
        print(f"T=65536 W={w} {name}: fwd {bench(f, q, k, v, np.int32(w)):.2f} ms, fwd+bwd {bench(fb, q, k, v, np.int32(w)):.2f} ms", flush=True)
    o1 = jax.jit(lambda q, k, v: flash_attention(q, k, v, ids, w))(q, k, v); o2 = jax.jit(lambda q, k, v: attention.blocked_attention(q, k, v, ids, w))(q, k, v)
    print(f"T=65536 W={w} pallas vs blocked max abs {float(jnp.abs(o1.astype(jnp.float32) - o2.astype(jnp.float32)).max()):.3g}", flush=True)
