"""Tools around jaxgpt and torch_ref: benchmarks, the fusion study, the GPU check and the 8-GPU
projection, checkpoint comparison, the parity checks and their report, profiler-trace and
loss-curve readers, the mask picture, the soak; each with its command in scripts/. Imports
jaxgpt and torch_ref, never the other way round."""
