"""bench.py suite `attention_gpu`: the record's attention on one GPU, five implementations.

At the record's shapes (B 1, T 65,536, H 6, Dh 128, bf16; documents of FineWeb-like lengths,
~1,000 tokens on average) and windows of 1..14 blocks, forward and forward+backward time of
  pallas   jaxgpt's block-sparse Pallas kernel (Triton; jaxgpt.kernels.flash_attention)
  mosaic   the same walk as Hopper kernels in Pallas Mosaic GPU (jaxgpt.kernels.mosaic_attention);
           not yet run on a GPU, so an error there is reported in the JSON, not raised
  blocked  jaxgpt's portable backend (every block of the static window, masked; a lax.scan)
  flex     torch_ref's compiled flex_attention with the record's BlockMask
  cudnn    what a JAX user would pick first: jax.nn.dot_product_attention(implementation="cudnn"),
           causal with a token sliding window of window x 128 keys (local_window_size); it takes
           no document mask (its public API has per-sequence lengths only), so it computes a
           different, wider mask than the record's: a baseline for speed, not for numerics
each the median of timed repeats after warm-up (jax: block_until_ready; torch: CUDA events).
One formula for every implementation's achieved TFLOP/s: the FLOPs of the key blocks the
record's mask lists (partial blocks as whole blocks; cuDNN's extra work across documents counts
for nothing): forward 4*128*128*Dh per listed block and head (QK^T and PV), forward+backward 3.5x
that (the backward's five block GEMMs against the forward's two). The GPU's dense bf16 peak
(NVIDIA's datasheet, `PEAK_BF16_TFLOPS`) stands beside them.

    PYTHONPATH=. python3 scripts/bench.py --only attention_gpu --json   # on a CUDA machine
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import numpy as np

from jaxgpt.config import BLOCK_SIZE, EOT_ID
from jaxgpt_tools.common.timing import time_calls

SEQ_LEN, HEADS, HEAD_DIM = 65536, 6, 128  # the record's per-device attention call


def document_tokens(seq_len: int, mean_doc_tokens: int, seed: int = 0) -> np.ndarray:
    """(seq_len,) int32 tokens whose EOTs open documents of exponentially distributed lengths
    (mean `mean_doc_tokens`), starting with an EOT as the record's shards do."""
    rng = np.random.default_rng(seed)
    tokens = rng.integers(0, EOT_ID, seq_len).astype(np.int32)
    starts = np.cumsum(np.maximum(1, rng.exponential(mean_doc_tokens, seq_len // 8).astype(np.int64)))
    tokens[0] = EOT_ID
    tokens[starts[starts < seq_len]] = EOT_ID
    return tokens


def listed_blocks(tokens: np.ndarray, window: int) -> int:
    """Key blocks visited over all query blocks of (T,) int32 `tokens` at `window` (partial + full
    lists, clamped)."""
    import jax.numpy as jnp

    from jaxgpt import masks

    lists = masks.window_block_lists(masks.document_ids(jnp.asarray(tokens)), window)
    return int(np.asarray(lists.kv_num_blocks).sum() + np.asarray(lists.full_kv_num_blocks).sum())


# Dense (not 2:4 sparse) bf16 tensor-core peak in TFLOP/s, from NVIDIA's H100 and H200 datasheets;
# matched against jax's device_kind, the first substring that occurs wins.
PEAK_BF16_TFLOPS = (("H100 PCIe", 756.0), ("H100", 989.4), ("H200", 989.4))


def peak_bf16_tflops(device_kind: str) -> float | None:
    """The dense bf16 peak of the GPU named `device_kind` (e.g. "NVIDIA H200"); None if unlisted."""
    return next((peak for name, peak in PEAK_BF16_TFLOPS if name in device_kind), None)


def _median_ms(run: Callable[[], Any], sync: Callable[[Any], Any], repeats: int) -> float:
    """Median ms of `repeats` synchronised calls after a compiling call and one warm-up call."""
    return time_calls(lambda: sync(run()), repeats, warmup=1)["median_ms"]


JAX_BACKENDS = ("pallas", "mosaic", "blocked")


def jax_times(tokens: np.ndarray, windows: list[int], repeats: int, backend: str) -> dict[int, dict[str, float]]:
    """{window: {"fwd_ms", "fwd_bwd_ms"}} of one jaxgpt attention backend on random bf16 q, k, v
    (1, T, HEADS, HEAD_DIM) with the documents of `tokens` (T,) int32 (T = SEQ_LEN in the suite)."""
    import jax
    import jax.numpy as jnp

    from jaxgpt import attention, masks

    shape = (1, len(tokens), HEADS, HEAD_DIM)
    rng = np.random.default_rng(1)
    q, k, v = (jnp.asarray(rng.standard_normal(shape), jnp.bfloat16) for _ in range(3))
    doc_ids = masks.document_ids(jnp.asarray(tokens)[None])
    cotangent = jnp.asarray(rng.standard_normal(shape), jnp.bfloat16)

    def forward(q, k, v, window):
        return attention.attention(q, k, v, doc_ids, window, backend=backend)

    fwd = jax.jit(forward)
    fwd_bwd = jax.jit(jax.grad(lambda q, k, v, w: jnp.vdot(forward(q, k, v, w), cotangent).astype(jnp.float32),
                               argnums=(0, 1, 2)))
    results = {}
    for window in windows:
        w = jnp.int32(window)  # traced: one compile for every window, as in training
        results[window] = {
            "fwd_ms": _median_ms(lambda: fwd(q, k, v, w), jax.block_until_ready, repeats),
            "fwd_bwd_ms": _median_ms(lambda: fwd_bwd(q, k, v, w), jax.block_until_ready, repeats),
        }
    return results


def sliding_window_attention(q, k, v, window: int, implementation: Literal["xla", "cudnn"] | None = "cudnn"):
    """jax.nn.dot_product_attention of (B, T, H, Dh) q, k, v, causal, each query attending its own
    and the `window` x BLOCK_SIZE - 1 keys before it (a token window: no blocks, no documents);
    `implementation` "cudnn" on a GPU, "xla" anywhere (the CPU tests' check of the mask)."""
    import jax

    return jax.nn.dot_product_attention(q, k, v, is_causal=True, local_window_size=(window * BLOCK_SIZE - 1, 0),
                                        implementation=implementation)


def cudnn_times(tokens: np.ndarray, windows: list[int], repeats: int) -> dict[int, dict[str, float]]:
    """{window: {"fwd_ms", "fwd_bwd_ms"}} of cuDNN's fused attention (`sliding_window_attention`)
    on random bf16 q, k, v (1, T, HEADS, HEAD_DIM), T = len(tokens); the documents are not used.
    The window is a static argument of cuDNN's kernel: one compile per window."""
    import jax
    import jax.numpy as jnp

    shape = (1, len(tokens), HEADS, HEAD_DIM)
    rng = np.random.default_rng(1)
    q, k, v = (jnp.asarray(rng.standard_normal(shape), jnp.bfloat16) for _ in range(3))
    cotangent = jnp.asarray(rng.standard_normal(shape), jnp.bfloat16)
    results = {}
    for window in windows:
        fwd = jax.jit(lambda q, k, v, window=window: sliding_window_attention(q, k, v, window))
        fwd_bwd = jax.jit(jax.grad(lambda q, k, v, window=window: jnp.vdot(
            sliding_window_attention(q, k, v, window), cotangent).astype(jnp.float32), argnums=(0, 1, 2)))
        results[window] = {
            "fwd_ms": _median_ms(lambda: fwd(q, k, v), jax.block_until_ready, repeats),
            "fwd_bwd_ms": _median_ms(lambda: fwd_bwd(q, k, v), jax.block_until_ready, repeats),
        }
    return results


def flex_times(tokens: np.ndarray, windows: list[int], repeats: int) -> dict[int, dict[str, float]]:
    """{window: {"fwd_ms", "fwd_bwd_ms"}} of torch_ref's compiled flex_attention on CUDA, random bf16
    q, k, v (1, HEADS, SEQ_LEN, HEAD_DIM), the record's BlockMask of `tokens` (SEQ_LEN,) int32."""
    import torch

    from torch_ref import attention as torch_attention
    from torch_ref import masks as torch_masks

    device = torch.device("cuda")
    generator = torch.Generator(device=device).manual_seed(1)
    q, k, v = (torch.randn(1, HEADS, len(tokens), HEAD_DIM, device=device, dtype=torch.bfloat16, generator=generator,
                           requires_grad=True) for _ in range(3))
    cotangent = torch.randn(1, HEADS, len(tokens), HEAD_DIM, device=device, dtype=torch.bfloat16, generator=generator)
    docs = torch_masks.document_ids(torch.as_tensor(tokens, device=device))
    lists = torch_masks.block_lists(docs)
    results = {}

    def sync(_: Any) -> None:
        torch.cuda.synchronize()

    for window in windows:
        mask = torch_masks.build_block_mask(torch_masks.truncate_to_window(lists, window), docs)

        def forward():
            with torch.no_grad():
                return torch_attention.attend(q, k, v, mask)

        def forward_backward():
            out = torch_attention.attend(q, k, v, mask)
            return torch.autograd.grad(out, (q, k, v), cotangent)

        results[window] = {"fwd_ms": _median_ms(forward, sync, repeats),
                           "fwd_bwd_ms": _median_ms(forward_backward, sync, repeats)}
    return results


def require_gpu() -> None:
    """ValueError unless JAX's default backend is a GPU: the suite times CUDA kernels."""
    import jax

    if jax.default_backend() != "gpu":
        raise ValueError("the attention_gpu suite needs a CUDA GPU (set JAX_PLATFORMS=cuda on a GPU machine)")


def measure(name: str, tokens: np.ndarray, windows: list[int], repeats: int) -> dict[int, dict[str, float]]:
    """One implementation's times (`jax_times` for jaxgpt's backends, `flex_times` for "flex",
    `cudnn_times` for "cudnn")."""
    if name == "flex":
        return flex_times(tokens, windows, repeats)
    if name == "cudnn":
        return cudnn_times(tokens, windows, repeats)
    return jax_times(tokens, windows, repeats, name)


# Implementations that may fail without failing the suite (each loses only its rows): the kernel
# no GPU has run yet, torch's, and cuDNN's (its version and the GPU decide what it accepts).
MAY_FAIL = ("mosaic", "flex", "cudnn")
RATIOS = (("pallas", "flex"), ("mosaic", "flex"), ("mosaic", "pallas"), ("blocked", "pallas"), ("pallas", "cudnn"),
          ("mosaic", "cudnn"))


def rows(tokens: np.ndarray, windows: list[int], timings: dict[str, dict[Any, Any]]) -> list[dict[str, Any]]:
    """One row per window: each measured implementation's ms and achieved TFLOP/s, and the ratios
    of those present (`timings[name]` holds an "error" instead where that implementation failed)."""
    result = []
    for window in windows:
        fwd_flops = 4 * BLOCK_SIZE * BLOCK_SIZE * HEAD_DIM * HEADS * listed_blocks(tokens, window)
        row: dict[str, Any] = {"window_blocks": window, "fwd_gflop": round(fwd_flops / 1e9, 2)}
        for name, table in timings.items():
            if window not in table:
                continue
            t = table[window]
            row[f"{name}_fwd_ms"] = round(t["fwd_ms"], 3)
            row[f"{name}_fwd_bwd_ms"] = round(t["fwd_bwd_ms"], 3)
            row[f"{name}_fwd_tflops"] = round(fwd_flops / t["fwd_ms"] / 1e9, 1)
            row[f"{name}_fwd_bwd_tflops"] = round(3.5 * fwd_flops / t["fwd_bwd_ms"] / 1e9, 1)
        for a, b in RATIOS:
            if f"{a}_fwd_bwd_ms" in row and f"{b}_fwd_bwd_ms" in row:
                row[f"{a}_over_{b}_fwd_bwd"] = round(row[f"{a}_fwd_bwd_ms"] / row[f"{b}_fwd_bwd_ms"], 3)
        result.append(row)
    return result


def shape(tokens: np.ndarray) -> dict[str, Any]:
    documents = int((tokens == EOT_ID).sum())
    return {"batch": 1, "seq_len": len(tokens), "heads": HEADS, "head_dim": HEAD_DIM, "dtype": "bfloat16",
            "documents": documents, "mean_doc_tokens": round(len(tokens) / documents)}


def bench_attention_gpu(*, quick: bool, repeats: int = 10, mean_doc_tokens: int = 1000) -> dict[str, Any]:
    """The suite (module docstring): {"shape", "device", "repeats", "rows": one per window with each
    implementation's ms and TFLOP/s and their ratios, "peak_bf16_tflops", and "<name>_error" of
    each of MAY_FAIL}; ValueError without a CUDA GPU (`require_gpu`)."""
    import jax

    require_gpu()
    windows = [1, 4, 14] if quick else [1, 2, 4, 7, 10, 14]
    tokens = document_tokens(SEQ_LEN, mean_doc_tokens)
    timings: dict[str, Any] = {}
    for name in (*JAX_BACKENDS, "flex", "cudnn"):
        try:
            timings[name] = measure(name, tokens, windows, repeats)
        except Exception as error:  # noqa: BLE001 - MAY_FAIL's failures are reported, not raised
            if name not in MAY_FAIL:
                raise
            timings[name] = {"error": f"{type(error).__name__}: {error}"}
    device = str(jax.devices()[0].device_kind)
    return {"shape": shape(tokens), "device": device, "peak_bf16_tflops": peak_bf16_tflops(device),
            "repeats": repeats, "rows": rows(tokens, windows, timings),
            **{f"{name}_error": timings[name].get("error") for name in MAY_FAIL}}
