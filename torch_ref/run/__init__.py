"""The machinery of running the record in PyTorch: flags, checks before a run, log lines and
metrics, signals, lost peers, profiling, checkpoints (mirrors `jaxgpt.run`)."""
