"""The record's compiled step: the model built (fresh, or from --init-from's state), the
record's optimizer, and the train and eval steps jit-compiled under `jax.shard_map` over a 1-D
mesh with axis "data".

Each device (the record's rank) computes the loss and gradients of its own sequences, the
gradients are averaged with `lax.pmean`, and the record's optimizer (distributed Muon + Adam
groups) updates parameters and optimizer state, which are replicated on every device and donated
to the step. The window (W_long) enters the step as an int32 value and the LR / momentum
schedules are count-based inside the optimizer, so the step compiles once for the whole run.

The trainer's loop (jaxgpt.loop) and the tools (benchmarks, compile-only GPU plans, parity
studies) import this module; the command (jaxgpt.train) never does before the run holds its
folders.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from jax import lax
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from jaxgpt import config as cfg
from jaxgpt import data, optim
from jaxgpt import layers as layers_lib
from jaxgpt import model as model_lib
from jaxgpt import params as params_lib
from jaxgpt.muon import Collective
from jaxgpt.run import convert
from jaxgpt.run.cli import RunOptions

AXIS = "data"  # the mesh axis: data parallel, device index = the record's rank

# ---------------------------------------------------------------------------------------------
# The model's parameters as a flat {record name: array} dict, and the compiled steps


def device_model_config(preset: cfg.Preset, num_devices: int) -> cfg.ModelConfig:
    """The model config the compiled step uses: the FP8 gradient scale sized for the tokens of
    one device's loss mean (cfg.fp8_grad_scale_for). The run's config keeps the record's 2^29."""
    local_tokens = preset.train.batch_tokens // num_devices
    return cfg.replace(preset.model, fp8_grad_scale=cfg.fp8_grad_scale_for(local_tokens, preset.model.fp8_grad_scale))


def build_model(preset: cfg.Preset, options: RunOptions, *, num_devices: int = 1,
                init_state: dict[str, Any] | None = None) -> tuple[cfg.Preset, params_lib.ModelGraph, dict[str, np.ndarray]]:
    """The model graph and its initial parameters {record name: host array}.

    With --init-from the model dims come from the checkpoint's shapes and the values are
    exactly the checkpoint's (cast to the policy's dtypes); otherwise a fresh init from --seed.
    `init_state`: the --init-from state dict as the run's preflight read and checked it, `preset`
    already holding its dims (preflight.RunStart): then nothing is read, inferred or checked
    again. Without it (a tool's call) --init-from is resolved here (convert.init_preset).
    Returns (preset with the model config actually used, graph, params)."""
    if options.init_from is None:
        model = model_lib.GPT(device_model_config(preset, num_devices), rngs=nnx.Rngs(preset.train.seed))
        graph, params = params_lib.ModelGraph.split(model)
        return preset, graph, {name: np.asarray(value) for name, value in params.items()}
    if init_state is None:
        preset, init_state = convert.init_preset(preset, options.init_from, options.head_dim)
        assert init_state is not None  # init_preset reads the --init-from file it is given
    loaded = convert.torch_state_dict_to_params(init_state, preset.model)
    model = nnx.eval_shape(lambda: model_lib.GPT(device_model_config(preset, num_devices), rngs=nnx.Rngs(0)))
    graph, abstract = params_lib.ModelGraph.split(model)
    return preset, graph, {name: np.asarray(value).astype(abstract[name].dtype) for name, value in loaded.items()}


@dataclass(frozen=True)
class CompiledSteps:
    """The jitted steps over the mesh. train: (params, opt_state, inputs, targets, window) ->
    (params, opt_state, loss); evaluate: (params, inputs, targets, window) -> loss. inputs and
    targets are (S, T) int32 sharded over sequences; window is an int32 scalar (W_long).
    train_with_stop, the trainer's step: train with one more input, stop_flags (D,) int32 sharded
    over "data" (each process's signal flag, interrupt.StopRequest.flag), and one more output,
    their maximum over every device (an int32 scalar, one extra all-reduce of 4 bytes)."""

    train: Any
    train_with_stop: Any
    evaluate: Any
    replicated: NamedSharding  # params, optimizer state and scalars
    batch: NamedSharding  # (S, T) batches: sequences split over "data"


def compile_steps(mesh: Mesh, graph: params_lib.ModelGraph, optimizer: optax.GradientTransformation, *,
                  check_vma: bool = True) -> CompiledSteps:
    def local_loss(params, inputs, targets, window, *, train: bool):
        return graph.bind(params)(inputs, targets, window, train=train)

    def local_train_step(params, opt_state, inputs, targets, window):
        # Mark the replicated params as per-device values for the backward pass, so that every
        # gradient (custom_vjp FP8 head included) is a local one; pmean then averages them.
        local_params = jax.tree.map(lambda p: lax.pcast(p, AXIS, to="varying"), params)
        loss, grads = jax.value_and_grad(functools.partial(local_loss, train=True))(local_params, inputs, targets, window)
        # Every device holds the same number of tokens, so the mean of the per-device means is
        # the global token mean, as the record's all-reduce AVG.
        loss, grads = lax.pmean((loss, grads), AXIS)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    def local_train_step_with_stop(params, opt_state, inputs, targets, window, stop_flags):
        params, opt_state, loss = local_train_step(params, opt_state, inputs, targets, window)
        return params, opt_state, loss, lax.pmax(stop_flags[0], AXIS)

    def local_eval_step(params, inputs, targets, window):
        return lax.pmean(local_loss(params, inputs, targets, window, train=False), AXIS)

    batch_spec, rep = P(AXIS), P()
    train_step = jax.shard_map(
        local_train_step, mesh=mesh, in_specs=(rep, rep, batch_spec, batch_spec, rep), out_specs=(rep, rep, rep),
        check_vma=check_vma,
    )
    train_step_with_stop = jax.shard_map(
        local_train_step_with_stop, mesh=mesh, in_specs=(rep, rep, batch_spec, batch_spec, rep, batch_spec),
        out_specs=(rep, rep, rep, rep), check_vma=check_vma,
    )
    eval_step = jax.shard_map(local_eval_step, mesh=mesh, in_specs=(rep, batch_spec, batch_spec, rep), out_specs=rep,
                              check_vma=check_vma)
    return CompiledSteps(
        # The old params and optimizer state are dead after the step: donate their buffers.
        train=jax.jit(train_step, donate_argnums=(0, 1)),
        train_with_stop=jax.jit(train_step_with_stop, donate_argnums=(0, 1)),
        evaluate=jax.jit(eval_step),
        replicated=NamedSharding(mesh, rep),
        batch=NamedSharding(mesh, batch_spec),
    )


def make_optimizer(preset: cfg.Preset, muon_collective: Collective = "all_gather") -> optax.GradientTransformation:
    """The record's optimizer for a mesh step; bf16 embedding moments follow the dtype policy
    unless OptimConfig.bf16_embeddings says otherwise, bf16 scalar moments go with bf16 scalars
    (#15's "bf16_model"). `muon_collective`: Muon's exchange of Newton-Schulz results
    (optim.record_optimizer), the record's all_gather unless a plan asks."""
    bf16_embeddings = preset.optim.bf16_embeddings
    if bf16_embeddings is None:
        bf16_embeddings = layers_lib.stream_dtype(preset.model) == jnp.bfloat16
    # --steps 0 takes no step; its schedules (never applied) are those of a 1-step run.
    return optim.record_optimizer(preset.optim, max(preset.train.steps, 1), axis_name=AXIS,
                                 bf16_embeddings=bf16_embeddings, muon_collective=muon_collective,
                                 bf16_scalars=layers_lib.scalar_dtype(preset.model) == jnp.bfloat16)


def prepare_steps(preset: cfg.Preset, mesh: Mesh, graph: params_lib.ModelGraph, *, muon_collective: Collective = "all_gather",
                  check_vma: bool = True) -> tuple[optax.GradientTransformation, CompiledSteps]:
    """The record's optimizer for `preset` and the steps compiled over `mesh`: what the trainer,
    the benchmarks and the compile-only GPU plans all run (one sequence, written once)."""
    optimizer = make_optimizer(preset, muon_collective)
    return optimizer, compile_steps(mesh, graph, optimizer, check_vma=check_vma)


def place_state(host_params: dict[str, np.ndarray], optimizer: optax.GradientTransformation,
                compiled: CompiledSteps) -> tuple[Any, Any]:
    """(params, optimizer state) replicated over the steps' mesh, from host parameters."""
    params = replicate(host_params, compiled.replicated)
    return params, jax.jit(optimizer.init, out_shardings=compiled.replicated)(params)


def one_device_steps(preset: cfg.Preset) -> tuple[cfg.Preset, CompiledSteps, Any, Any, dict[str, np.ndarray]]:
    """The trainer's steps on a mesh of device 0 from the preset's fresh init: (preset as built,
    compiled steps, params and optimizer state on the mesh, the initial params {record name:
    host array}). The train step donates params and optimizer state: each call takes the
    previous call's outputs."""
    mesh = Mesh(np.array(jax.devices()[:1]), (AXIS,))
    preset, graph, host_params = build_model(preset, RunOptions(), num_devices=1)
    optimizer, compiled = prepare_steps(preset, mesh, graph)
    return preset, compiled, *place_state(host_params, optimizer, compiled), host_params


def replicate(tree: Any, sharding: NamedSharding) -> Any:
    """Host arrays -> global arrays replicated over the mesh (works on several hosts too)."""

    def place(value: Any) -> jax.Array:
        value = np.asarray(value)
        return jax.make_array_from_callback(value.shape, sharding, lambda index: value[index])

    return jax.tree.map(place, tree)


def stop_flags(flag: int, sharding: NamedSharding) -> jax.Array:
    """(D,) int32 sharded over "data": `flag` on each of this process's devices (the train
    step's input that carries every process's signal flag into its all-reduce)."""
    local = np.full(len(sharding.addressable_devices), flag, np.int32)
    return jax.make_array_from_process_local_data(sharding, local, (sharding.mesh.size,))


@jax.jit
def all_finite(tree: Any) -> jax.Array:
    """True when no floating-point leaf of `tree` holds a NaN or an infinity (one bool, read
    once per save: a finite loss does not prove finite gradients, and a NaN state must never
    become the newest checkpoint)."""
    return jnp.all(jnp.stack([jnp.all(jnp.isfinite(leaf)) for leaf in jax.tree.leaves(tree)
                              if jnp.issubdtype(leaf.dtype, jnp.inexact)]))


def evaluate(preset: cfg.Preset, compiled: CompiledSteps, params: Any, window: Any) -> float:
    """Mean val loss over the first val_tokens tokens of the val shards, sliced as the record
    (val_tokens / batch_tokens global batches; device d takes its own sequences of each)."""
    train = preset.train
    batches = data.val_batches(train.val_files, train.val_tokens, train.batch_tokens, train.seq_len,
                               process_index=jax.process_index(), process_count=jax.process_count())
    losses = [compiled.evaluate(params, *data.to_global_arrays(batch, compiled.batch), window) for batch in batches]
    return float(sum(losses)) / len(losses)
