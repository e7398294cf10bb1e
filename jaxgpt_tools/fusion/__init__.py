"""The fusion study: XLA and TorchInductor on the merged and separate QKV path."""
