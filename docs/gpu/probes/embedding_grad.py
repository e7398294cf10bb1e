"""How long does the embedding tables' backward take on a GPU, and how does it depend on the tokens?

Four bf16 (50304, 768) tables looked up with the same 65,536 ids (the token embedding and the
three value embeddings), fwd+bwd, under three id distributions: uniform over the vocabulary, a
real GPT-2 BPE batch (from --shard), and byte tokens (0..255 plus EOT). Variants of the backward:
  autodiff  jnp.take's own transpose: a bf16 scatter-add (duplicate ids collide)
  segsum    custom_vjp: fp32 segment_sum over the ids, one rounding to bf16
  sorted    custom_vjp: ids sorted first, fp32 segment_sum with indices_are_sorted
Errors are against the fp32 segment_sum (max |diff| / max |ref| over the tables).

    JAX_PLATFORMS=cuda PYTHONPATH=. python3 docs/gpu/probes/embedding_grad.py --shard .probe/bpe.bin
"""

from __future__ import annotations

import argparse
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np

V, D, N, TABLES = 50304, 768, 65536, 4


def lookup_segsum(sort: bool):
    @jax.custom_vjp
    def lookup(table, ids):
        return jnp.take(table, ids, axis=0)

    def fwd(table, ids):
        return lookup(table, ids), ids

    def bwd(ids, g):
        g = g.astype(jnp.float32)
        if sort:
            order = jnp.argsort(ids)
            ids, g = ids[order], g[order]
        grad = jax.ops.segment_sum(g, ids, num_segments=V, indices_are_sorted=sort)
        return grad.astype(jnp.bfloat16), None

    lookup.defvjp(fwd, bwd)
    return lookup


VARIANTS = {"autodiff": lambda t, i: jnp.take(t, i, axis=0), "segsum": lookup_segsum(False),
            "sorted": lookup_segsum(True)}


def grads_fn(lookup):
    def loss(tables, ids, cot):
        return sum(jnp.vdot(lookup(t, ids).astype(jnp.float32), cot) for t in tables)

    return jax.jit(jax.grad(loss))


def bench(fn, *args, n=10):
    jax.block_until_ready(fn(*args))
    times = []
    for _ in range(n):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(1e3 * (time.perf_counter() - start))
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shard", default=None, help="a .bin shard with GPT-2 BPE tokens")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    id_sets = {"uniform": rng.integers(0, 50257, N)}
    if args.shard:
        id_sets["bpe"] = np.fromfile(args.shard, dtype=np.uint16)[512: 512 + N].astype(np.int64)
    id_sets["bytes"] = np.where(rng.random(N) < 1e-3, 50256, rng.integers(32, 127, N))
    tables = [jax.random.normal(jax.random.key(k), (V, D), jnp.float32).astype(jnp.bfloat16) for k in range(TABLES)]
    cot = jax.random.normal(jax.random.key(9), (N, D), jnp.float32)
    fns = {name: grads_fn(lookup) for name, lookup in VARIANTS.items()}
    for set_name, ids in id_sets.items():
        ids = jnp.asarray(ids, jnp.int32)
        counts = np.bincount(np.asarray(ids))
        reference = fns["segsum"](tables, ids, cot)
        scale = max(float(jnp.abs(r.astype(jnp.float32)).max()) for r in reference)
        for name, fn in fns.items():
            ms = bench(fn, tables, ids, cot)
            out = fn(tables, ids, cot)
            err = max(float(jnp.abs(o.astype(jnp.float32) - r.astype(jnp.float32)).max()) for o, r in zip(out, reference))
            print(f"RESULT ids={set_name:8s} (distinct {np.count_nonzero(counts):5d}, most frequent {counts.max():5d}) "
                  f"{name:9s} {ms:8.2f} ms for {TABLES} tables fwd+bwd, max err {err / scale:.2e} of max", flush=True)


if __name__ == "__main__":
    main()
