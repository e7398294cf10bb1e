"""One-off: pallas vs blocked attention at T=65536 when documents fill the window (not committed)."""
import sys, time, numpy as np, jax, jax.numpy as jnp
from jaxgpt import attention, masks
from jaxgpt.kernels.flash_attention import flash_attention
def bench(fn, *a, n=10):
    jax.block_until_ready(fn(*a)); ts = []
    for _ in range(n):
        t = time.perf_counter(); jax.block_until_ready(fn(*a)); ts.append(time.perf_counter() - t)
    return 1e3 * float(np.median(ts))
rng = np.random.default_rng(0)
for doc_len in (1000, 4000, 65536):
    T = 65536
    toks = rng.integers(0, 50000, size=(1, T)); toks[0, ::doc_len] = 50256
    ids = masks.document_ids(jnp.asarray(toks))
    q, k, v = (jnp.asarray(rng.standard_normal((1, T, 6, 128)), jnp.bfloat16) for _ in range(3))
    for w in (7, 14):
        fb = jax.jit(jax.grad(lambda q, k, v, w: flash_attention(q, k, v, ids, w).astype(jnp.float32).sum(), argnums=(0, 1, 2)))
        f = jax.jit(lambda q, k, v, w: flash_attention(q, k, v, ids, w))
        print(f"docs of {doc_len} tokens, W={w}: pallas fwd {bench(f, q, k, v, np.int32(w)):.2f} ms, fwd+bwd {bench(fb, q, k, v, np.int32(w)):.2f} ms", flush=True)
