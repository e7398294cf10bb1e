"""What every tool shares, each once: the timer, the environment report, generated files without
machine paths, child processes, the reader of XLA's optimized HLO."""
