"""The lineage's attention windows and document ids (LINEAGE.md sections 4-5): what a step's
window value means for each attention mask, which tokens are one document, the backend a mask
needs, and the window a step's metrics record.

  "document_blocks"  the record's: W_long blocks for the long layers, W_long // 2 for the short
  "document_tokens"  #15's: one token window sw for every layer, within ceil(sw / 128) blocks
  "causal"           #8/#9's plain causal attention over every earlier key (one document)
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

from jaxgpt import attention as attention_lib
from jaxgpt import masks
from jaxgpt.attention import AttentionWindow
from jaxgpt.config import AttentionBackend, ModelConfig
from jaxgpt.masks import WindowBlocks

# (config, the step's window value, keys' sequence length) -> {"long": window, "short": window}
Windows = Callable[[ModelConfig, WindowBlocks, int], dict[str, AttentionWindow]]
# ((B, T) input ids, EOT id) -> (B, T) int32 document ids
DocumentIds = Callable[[jax.Array, int], jax.Array]


def block_windows(config: ModelConfig, window: WindowBlocks, seq_len: int) -> dict[str, AttentionWindow]:
    """The record's: W_long blocks for the long layers, W_long // 2 for the short ones."""
    del seq_len
    return {"long": AttentionWindow(window, None, config.max_window_blocks),
            "short": AttentionWindow(window // 2, None, config.max_window_blocks)}


def token_windows(config: ModelConfig, window: WindowBlocks, seq_len: int) -> dict[str, AttentionWindow]:
    """#15's: one token window sw for every layer, AND ceil(sw / 128) blocks (LINEAGE.md 5.4)."""
    del seq_len
    one = AttentionWindow((window + config.block_size - 1) // config.block_size, window, config.max_window_blocks)
    return {"long": one, "short": one}


def causal_windows(config: ModelConfig, window: WindowBlocks, seq_len: int) -> dict[str, AttentionWindow]:
    """#8/#9's plain causal attention: every earlier key of the sequence, a window of all its blocks."""
    del window
    everything = AttentionWindow(-(-seq_len // config.block_size), None, -(-seq_len // config.block_size))
    return {"long": everything, "short": everything}


WINDOWS: dict[str, Windows] = {
    "document_blocks": block_windows, "document_tokens": token_windows, "causal": causal_windows}


def one_document(input_ids: jax.Array, eot_id: int) -> jax.Array:
    """#8/#9: zeros, every token in one document (they attend across EOTs)."""
    del eot_id
    return jnp.zeros(input_ids.shape, jnp.int32)


DOCUMENT_IDS: dict[str, DocumentIds] = {
    "document_blocks": masks.document_ids, "document_tokens": masks.document_ids, "causal": one_document}


def configured_backend(backend: AttentionBackend) -> AttentionBackend:
    """The record's: the configured backend, "auto" resolved where the attention is traced."""
    return attention_lib.resolve_backend(backend)


def block_window_backend(backend: AttentionBackend) -> AttentionBackend:
    """#15's token window: "auto" means "blocked" (the Pallas kernel applies block windows only)."""
    return "blocked" if backend == "auto" else attention_lib.resolve_backend(backend)


# The configured backend -> the one the attention calls use, by mask; called where the attention
# is traced, since "auto" depends on it (attention.resolve_backend).
BACKENDS: dict[str, Callable[[AttentionBackend], AttentionBackend]] = {
    "document_blocks": configured_backend, "document_tokens": block_window_backend, "causal": configured_backend}


def attention_backend(config: ModelConfig) -> AttentionBackend:
    """The backend the attention calls of `config`'s model use, resolved here."""
    return BACKENDS[config.lineage.attention_mask](config.attention_backend)


def logged_window(config: ModelConfig, window: int) -> dict[str, int]:
    """The step's window as its long layers' attention takes it, for the metrics: `window_blocks`,
    the block window after the cap (W_long; #15's ceil(sw / 128); 0 for #8/#9's plain causal
    attention, which has no window), and, for #15, `window_tokens`: sw."""
    if config.lineage.attention_mask == "causal":
        return {"window_blocks": 0}
    long = WINDOWS[config.lineage.attention_mask](config, window, 0)["long"]
    logged = {"window_blocks": min(int(long.blocks), long.max_blocks)}
    return logged if long.tokens is None else {**logged, "window_tokens": int(long.tokens)}
