"""The run machinery both trainers share, written once: framework-neutral (the standard library
only: no jax, flax, optax, orbax, torch or numpy), imported by jaxgpt.run, torch_ref.run and the
trainers' entry points, never by the record's numerics (tests/test_imports.py). Each module is
the part of the run/ module of the same name that both packages state alike (docs/DESIGN.md)."""
