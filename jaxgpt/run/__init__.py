"""The machinery of running the record reliably: flags, checks before a run, log lines and
metrics, signals, lost peers, profiling, the compilation cache, checkpoints and the record's
`.pt` format."""
