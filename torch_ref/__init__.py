"""torch_ref: the Sub3Min record in PyTorch, kept canonical (same names, shapes, numerics)."""
