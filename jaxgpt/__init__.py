"""jaxgpt: the Sub3Min NanoGPT speedrun record in JAX/Flax."""
