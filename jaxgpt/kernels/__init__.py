"""Hand-written accelerator kernels (Pallas). `flash_attention` is the record's block-sparse
document-causal attention; `block_lists` builds the per-block key lists it walks."""
