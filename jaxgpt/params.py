"""A GPT's parameters as a flat {record name: array} dict: the pytree the compiled steps take,
donate and checkpoint, and the checks of such a dict against a model (names, shapes)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from jaxgpt.config import ModelConfig
from jaxgpt.model import GPT


@dataclass(frozen=True)
class ModelGraph:
    """The NNX graph of a GPT and where each record-named parameter sits in it, so that a flat
    {record name: array} dict can be the pytree a compiled step takes and donates."""

    graphdef: Any
    paths: dict[str, tuple]  # record name -> NNX state path

    @classmethod
    def split(cls, model: nnx.Module) -> tuple[ModelGraph, dict[str, jax.Array]]:
        """(graph, params by record name) of `model` (an nnx.eval_shape model gives shapes)."""
        graphdef, state = nnx.split(model)
        paths = {path_to_name(path): path for path, _ in nnx.to_flat_state(state)}
        return cls(graphdef, paths), param_dict(model)

    def bind(self, params: dict[str, Any]) -> GPT:
        """A GPT module over `params` (usable inside jit: no copies, no checks)."""
        state = nnx.from_flat_state({self.paths[name]: value for name, value in params.items()})
        return nnx.merge(self.graphdef, state)


def path_to_name(path: tuple) -> str:
    """NNX state path (e.g. ('blocks', 3, 'attn', 'qkv_w')) -> record key 'blocks.3.attn.qkv_w'."""
    return ".".join(str(part) for part in path)


def param_dict(model: nnx.Module) -> dict[str, jax.Array]:
    """All nnx.Param values keyed by record name, in the model's dtypes."""
    flat = nnx.to_flat_state(nnx.state(model, nnx.Param))
    return {path_to_name(path): variable.get_value() for path, variable in flat}


def param_shapes(config: ModelConfig) -> dict[str, jax.ShapeDtypeStruct]:
    """Name -> shape/dtype of every parameter of GPT(config), without allocating anything."""
    abstract = nnx.eval_shape(lambda: GPT(config, rngs=nnx.Rngs(0)))
    return {name: jax.ShapeDtypeStruct(value.shape, value.dtype) for name, value in param_dict(abstract).items()}


def param_shape_problems(params: Mapping[str, Any], expected: Mapping[str, Sequence[int]]) -> list[str]:
    """Every way `params` ({name: array-like}) differs from `expected` ({name: shape}): missing
    names, unknown names and mis-shaped arrays, as readable fragments. Empty when they fit."""
    shapes = {name: tuple(np.shape(value if hasattr(value, "shape") else np.asarray(value))) for name, value in params.items()}
    missing = sorted(set(expected) - set(shapes))
    unknown = sorted(set(shapes) - set(expected))
    misshaped = sorted(
        f"{name}: got {shapes[name]}, expected {tuple(expected[name])}"
        for name in set(expected) & set(shapes) if shapes[name] != tuple(expected[name])
    )
    if not (missing or unknown or misshaped):
        return []
    return [f"missing {missing}", f"unknown {unknown}", f"mis-shaped {misshaped}"]


def check_param_shapes(params: Mapping[str, Any], expected: Mapping[str, Sequence[int]], what: str) -> None:
    """Raise ValueError listing every missing, unknown and mis-shaped name (see param_shape_problems)."""
    problems = param_shape_problems(params, expected)
    if problems:
        raise ValueError(f"parameters do not match {what}: " + "; ".join(problems))


def load_param_dict(model: nnx.Module, params: dict[str, jax.Array | np.ndarray]) -> None:
    """Set every parameter of `model` from `params` (record names), cast to the model's dtypes.

    Raises ValueError listing all missing, unknown and mis-shaped names.
    """
    state = nnx.state(model, nnx.Param)
    flat = nnx.to_flat_state(state)
    expected = {path_to_name(path): variable for path, variable in flat}
    check_param_shapes(params, {name: variable.get_value().shape for name, variable in expected.items()}, "the model")
    for name, variable in expected.items():
        variable.set_value(jnp.asarray(params[name]).astype(variable.get_value().dtype))
    nnx.update(model, nnx.from_flat_state(flat))
