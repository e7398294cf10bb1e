"""The records' own training code on the CPU in fp32: the parity suite's third column.

Each of the five records (#8 untie-embed, #9 shortcuts, #15 unet-value-embeds, #18 softcap, #20
record) publishes its whole training script at the top of its log (docs/spec/LINEAGE.md, "Sources").
This module takes the script out of the log at run time (`upstream_record.script_from_log`),
applies the smallest changes that let its model and optimizer run on a CPU in fp32 (`changes`:
each a `Patch` that must match exactly once, or a name the harness binds before the script
runs), and executes the part above its `# int main` line: the model, Muon and the helpers. From
the part below it (the training loop, never executed as a whole) it executes only the statements
that build the optimizers and LR schedulers and those the loop runs each step for the window,
the Muon momentum warmup and the optimizer steps (`SNIPPETS`), each also found exactly once.
Nothing of the scripts is stored in this repository; the logs are read from `logs_root()`
($JAXGPT_UPSTREAM_LOGS, default ../shared/upstream beside the checkout; `python
scripts/fetch_record.py --lineage-logs DIR` downloads them).

The harness in modules: `record_logs` (where the logs lie, the script out of a log; its names
are re-exported here), `record_standins` (what stands in for torch.distributed and
FlexAttention), `record_changes` (the changes and the statements taken from the main part), this
module (the record's code loaded, its model and forward), `record_optim` (a few steps of its own
optimizers and schedules).

What the harness computes (used by jaxgpt_tools.parity.record_code_checks):
- `build_model` + `load_state`: the record's GPT at given dims holding a state dict in the
  record's own names (`project_names` maps them to this project's); `forward` gives its loss,
  the lm_head's logits (before any soft-cap) and every gradient;
- `record_optim.train`: a few steps of the record's own Muon, Adam(s), LR schedule, momentum
  warmup and window schedule on given batches, the gradient of each step taken on one device or
  on two (the record's data parallelism: each rank's mean gradient, averaged as DDP / all-reduce
  AVG do);
- `record_optim.schedule`: its LR multiplier, Muon momentum and window at every step of its own
  whole run.
Every forward runs in eval mode: the models' only train/eval difference is #20's FP8 lm_head,
a CUDA kernel (torch._scaled_mm) that the fp32 policy of both frameworks does not use either.
"""

from __future__ import annotations

import functools
import sys
import types
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jaxgpt_tools.parity.record_changes import bf16_changes, changes, snippets
from jaxgpt_tools.parity.record_logs import (  # noqa: F401 - re-exported: the harness's public names
    FETCH_HINT,
    LOGS_ENV,
    RECORD_LOGS,
    REPO_ROOT,
    download_logs,
    log_path,
    logs_root,
    missing_logs,
    record_script,
)
from jaxgpt_tools.parity.record_standins import KvBlocks, OneRank, dense_flex_attention, kernel_flex_attention
from jaxgpt_tools.upstream_record import patch_script

# ---------------------------------------------------------------------------------------------
# The record's code, loaded


@dataclass(frozen=True)
class LoadedRecord:
    """A record's script after `changes`, executed as a module; `snippets` from its main part;
    `applied`: each change with its reason and line in the log's script."""

    name: str
    module: Any  # the script executed as a module: its names are the script's own
    snippets: dict[str, str]
    applied: tuple[dict[str, object], ...]


@functools.cache
def load(name: str, eot_id: int = 50256, root: Path | None = None, precision: str = "fp32") -> LoadedRecord:
    """Record `name`'s code, patched and executed once per process (#20 registers custom torch
    ops at import, which a second execution would register again). `precision` "fp32": the
    fp32 column's `changes`; "bf16": the record's own precision (`bf16_changes`, #15-#20 only),
    its attention through `kernel_flex_attention`. Raises FileNotFoundError when its log is
    absent, ValueError when a change or statement is not found exactly once."""
    if precision not in ("fp32", "bf16"):
        raise ValueError(f"precision must be 'fp32' or 'bf16', got {precision!r}")
    script = record_script(name, root)
    patches = changes(name, eot_id) if precision == "fp32" else bf16_changes(name, eot_id)
    source, applied = patch_script(script, patches, what=f"record {name!r}'s script")
    suffix = "" if precision == "fp32" else "_bf16"
    module = types.ModuleType(f"record_code_{name.replace('-', '_')}{suffix}")
    import torch

    attention = dense_flex_attention if precision == "fp32" else kernel_flex_attention
    module.__dict__.update(dist=OneRank, BlockMask=KvBlocks, flex_attention=attention, rank=0,
                           NS_DTYPE=torch.float32)
    sys.modules[module.__name__] = module  # dataclasses look their module up while the script defines them
    with warnings.catch_warnings():  # #8/#9's docstrings hold "\s": an invalid escape, theirs to keep
        warnings.simplefilter("ignore", (DeprecationWarning, SyntaxWarning))
        code = compile(source, f"<record {name}: {RECORD_LOGS[name].file}>", "exec")
    exec(code, module.__dict__)  # noqa: S102 - the record's own code, the point of this module
    return LoadedRecord(name, module, snippets(name, script), tuple(applied))


@dataclass(frozen=True)
class Dims:
    """The dims a record's GPT is built with; `vocab_size` tokens (#8-#18 pass its multiple of 128
    as their GPT's vocabulary, #20 the count itself and pads only its head), as its main part does
    with 50304 and 50257."""

    vocab_size: int
    num_layers: int
    num_heads: int
    model_dim: int

    @property
    def padded_vocab(self) -> int:
        return -(-self.vocab_size // 128) * 128


# How each record's forward takes its batch: rows (#8/#9's (B, T) int64 batch, no window), or one
# packed sequence (T,) with the window in tokens (#15) or blocks (#18, #20) as an int32 tensor.
ROWS = ("untie-embed", "shortcuts")


def build_model(loaded: LoadedRecord, dims: Dims):
    """The record's GPT at `dims`, in eval mode, parameters fp32. #15's model is converted as its
    run does (`.bfloat16()`, LINEAGE.md 5.1) and its parameters then back to fp32: its rotary
    buffer `inv_freq` keeps the run's bf16 (docs/NUMERICS.md, "as written")."""
    ns, name = loaded.module, loaded.name
    if name in ("untie-embed", "shortcuts", "unet-value-embeds"):
        model = ns.GPT(ns.GPTConfig(vocab_size=dims.padded_vocab, n_layer=dims.num_layers, n_head=dims.num_heads,
                                    n_embd=dims.model_dim))
    else:
        vocab = dims.vocab_size if name == "record" else dims.padded_vocab
        model = ns.GPT(vocab_size=vocab, num_layers=dims.num_layers, num_heads=dims.num_heads, model_dim=dims.model_dim)
    if name == "unet-value-embeds":
        model.bfloat16()
        for param in model.parameters():
            param.data = param.data.float()
    return model.eval()


def project_names(model) -> dict[str, str]:
    """{this project's state-dict name (jaxgpt's and torch_ref's): the record's name} for every
    parameter of a record's GPT, through jaxgpt.run.convert.to_model_names (the rule
    compare_checkpoint and --init-from read records' checkpoints with)."""
    from jaxgpt.run.convert import to_model_names

    return {next(iter(to_model_names({key: None}))): key for key, _ in model.named_parameters()}


def load_state(model, state: dict[str, Any]) -> None:
    """Copy `state` ({record name: tensor or array}) into the model's parameters (and buffers it
    names), cast to their dtypes. ValueError listing unknown names and parameters left out."""
    import torch

    own = model.state_dict()
    unknown = sorted(set(state) - set(own))
    missing = sorted({name for name, _ in model.named_parameters()} - set(state))
    if unknown or missing:
        raise ValueError(f"state does not fit record {type(model).__module__}: unknown {unknown}, missing {missing}")
    with torch.no_grad():
        for key, value in state.items():
            own[key].copy_(torch.as_tensor(value))


@dataclass(frozen=True)
class Output:
    """One forward (and backward) of a record's model: the loss (fp32 mean), the lm_head's output
    (N, Vp) fp32 before any soft-cap, and the gradient of every parameter by record name (None
    without backward)."""

    loss: float
    logits: Any
    grads: dict[str, Any] | None


def call(name: str, model, inputs, targets, window: int | None):
    """The record's forward on one batch: (B, T) rows for #8/#9, one (T,) sequence otherwise."""
    import torch

    if name in ROWS:
        return model(torch.as_tensor(inputs, dtype=torch.long), torch.as_tensor(targets, dtype=torch.long),
                     return_logits=False)[1]
    window_arg = torch.tensor(window, dtype=torch.int32)
    return model(torch.as_tensor(inputs, dtype=torch.int32), torch.as_tensor(targets, dtype=torch.long), window_arg)


def forward(loaded: LoadedRecord, model, inputs, targets, window: int | None, *, backward: bool = True) -> Output:
    """Loss, logits and (with `backward`) gradients of the record's model on one batch (numpy
    int arrays: (B, T) for #8/#9, (T,) otherwise); `window` as the record's forward takes it
    (tokens for #15, blocks for #18 and #20, None for #8/#9). Gradients are zeroed first."""
    import torch

    captured = {}

    def keep_logits(_module, _inputs, output) -> None:  # returns None: the output stays in the graph
        captured["logits"] = output.detach()

    hook = model.lm_head.register_forward_hook(keep_logits)
    model.zero_grad(set_to_none=True)
    try:
        with torch.enable_grad() if backward else torch.no_grad():
            loss = call(loaded.name, model, inputs, targets, window)
            if backward:
                loss.backward()
    finally:
        hook.remove()
    logits = captured["logits"].float()
    grads = ({key: p.grad.float().numpy().copy() for key, p in model.named_parameters()} if backward else None)
    return Output(float(loss.detach()), logits.reshape(-1, logits.shape[-1]).numpy(), grads)
