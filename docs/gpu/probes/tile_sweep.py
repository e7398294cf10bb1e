"""Which Tiles make the Pallas kernel fastest on this GPU? (a probe, kept for provenance)

fwd and fwd+bwd medians of jaxgpt.kernels.flash_attention at the record's shapes (T 65,536,
H 6, Dh 128, bf16, ~1,400-token documents) for windows 4 and 14, one line per Tiles setting.

    JAX_PLATFORMS=cuda PYTHONPATH=. python3 docs/gpu/probes/tile_sweep.py
"""
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

from jaxgpt import masks
from jaxgpt.kernels.flash_attention import Tiles, flash_attention
from scripts.bench_attention_gpu import document_tokens

CONFIGS = [  # block_q, block_k, bwd_block_q, bwd_block_k, num_warps, num_stages
    (128, 64, 64, 64, 8, 2), (128, 64, 64, 128, 8, 2), (128, 64, 32, 128, 4, 3), (128, 64, 64, 128, 4, 3),
    (128, 128, 64, 128, 8, 2), (128, 64, 128, 128, 8, 2), (128, 64, 64, 64, 4, 3), (128, 128, 128, 128, 8, 3),
    (64, 64, 64, 64, 4, 2), (128, 64, 32, 64, 4, 2),
]


def median_ms(fn, *args, n=10):
    jax.block_until_ready(fn(*args))
    times = []
    for _ in range(n):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(1e3 * (time.perf_counter() - start))
    return statistics.median(times)


rng = np.random.default_rng(1)
q, k, v, cot = (jnp.asarray(rng.standard_normal((1, 65536, 6, 128)), jnp.bfloat16) for _ in range(4))
doc_ids = masks.document_ids(jnp.asarray(document_tokens(65536, 1000))[None])
for config in CONFIGS:
    tiles = Tiles(*config)
    fwd = jax.jit(lambda q, k, v, w: flash_attention(q, k, v, doc_ids, w, tiles=tiles))
    fwd_bwd = jax.jit(jax.grad(lambda q, k, v, w: jnp.vdot(fwd(q, k, v, w), cot).astype(jnp.float32), argnums=(0, 1, 2)))
    try:
        cells = [f"W{w}: fwd {median_ms(fwd, q, k, v, jnp.int32(w)):.3f} fwd+bwd {median_ms(fwd_bwd, q, k, v, jnp.int32(w)):.3f}"
                 for w in (4, 14)]
        print(f"RESULT {config}: " + " | ".join(cells), flush=True)
    except Exception as error:  # noqa: BLE001 - a tile Triton refuses is a result too
        print(f"RESULT {config}: FAILED {type(error).__name__}: {str(error)[:200]}", flush=True)
