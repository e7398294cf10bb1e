"""Benchmarks: the suites of `scripts/bench.py`, Newton-Schulz, one training step beside torch_ref's,
the record's attention on a GPU, the soak."""
