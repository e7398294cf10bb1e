"""A GPU, lent or compiled for: the device plan of one lease and its steps, gpu_check, the training
step compiled for an H100 without one, profiler traces ranked, the tile sweep, the 8-GPU projection,
the torch APIs of the GPU-only code paths checked against a given torch (torch_api; torch_exercises: what a CPU runs of them)."""
