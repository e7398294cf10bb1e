"""Tools around jaxgpt and torch_ref: benchmarks, the fusion study, the GPU check, checkpoint
comparison. Imports jaxgpt and torch_ref, never the other way round; scripts/ are its commands."""
