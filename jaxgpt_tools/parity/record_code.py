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

What the harness computes (used by jaxgpt_tools.parity.record_code_checks):
- `build_model` + `load_state`: the record's GPT at given dims holding a state dict in the
  record's own names (`project_names` maps them to this project's); `forward` gives its loss,
  the lm_head's logits (before any soft-cap) and every gradient;
- `train`: a few steps of the record's own Muon, Adam(s), LR schedule, momentum warmup and window
  schedule on given batches, the gradient of each step taken on one device or on two (the
  record's data parallelism: each rank's mean gradient, averaged as DDP / all-reduce AVG do);
- `schedule`: its LR multiplier, Muon momentum and window at every step of its own whole run.
Every forward runs in eval mode: the models' only train/eval difference is #20's FP8 lm_head,
a CUDA kernel (torch._scaled_mm) that the fp32 policy of both frameworks does not use either.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import sys
import textwrap
import types
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jaxgpt_tools.common.artifacts import REPO_ROOT
from jaxgpt_tools.upstream_record import Patch, patch_script, script_from_log

LOGS_ENV = "JAXGPT_UPSTREAM_LOGS"
DEFAULT_LOGS = REPO_ROOT.parent / "shared" / "upstream"
LOG_URL_BASE = "https://raw.githubusercontent.com/KellerJordan/modded-nanogpt/master/records/track_1_short"
FETCH_HINT = "python scripts/fetch_record.py --lineage-logs DIR, then JAXGPT_UPSTREAM_LOGS=DIR"


@dataclass(frozen=True)
class RecordLog:
    """Where a record's log lies (LINEAGE.md, "Sources"), by its preset name."""

    number: int
    folder: str
    file: str


RECORD_LOGS = {
    "untie-embed": RecordLog(8, "2024-11-03_UntieEmbed", "d6b50d71-f419-4d26-bb39-a60d55ae7a04.txt"),
    "shortcuts": RecordLog(9, "2024-11-06_ShortcutsTweaks", "dd7304a6-cc43-4d5e-adb8-c070111464a1.txt"),
    "unet-value-embeds": RecordLog(15, "2024-12-08_UNetValueEmbedsTweaks", "0069607b-aa90-49fd-9766-4368bcd168c4.txt"),
    "softcap": RecordLog(18, "2025-01-04_SoftCap", "31d6c427-f1f7-4d8a-91be-a67b5dcd13fd.txt"),
    "record": RecordLog(20, "2025-01-16_Sub3Min", "1d3bd93b-a69e-4118-aeb8-8184239d7566.txt"),
}


def logs_root() -> Path:
    """The folder holding the records' logs as <folder>/<file>: $JAXGPT_UPSTREAM_LOGS, else
    ../shared/upstream beside this checkout."""
    return Path(os.environ.get(LOGS_ENV) or DEFAULT_LOGS)


def log_path(name: str, root: Path | None = None) -> Path:
    """The log of record `name` (a preset name of RECORD_LOGS). FileNotFoundError naming how to
    get it when absent; ValueError for an unknown name."""
    if name not in RECORD_LOGS:
        raise ValueError(f"unknown record {name!r}; choose one of {sorted(RECORD_LOGS)}")
    log = RECORD_LOGS[name]
    path = (root or logs_root()) / log.folder / log.file
    if not path.is_file():
        raise FileNotFoundError(f"no log of record #{log.number} at {path}: set {LOGS_ENV} to the folder of the "
                                f"records' logs, or download them ({FETCH_HINT})")
    return path


def missing_logs(root: Path | None = None) -> list[str]:
    """The names of RECORD_LOGS whose log is absent under `root` (logs_root() by default)."""
    root = root or logs_root()
    return [name for name, log in RECORD_LOGS.items() if not (root / log.folder / log.file).is_file()]


def record_script(name: str, root: Path | None = None) -> str:
    """The training script at the top of record `name`'s log. #8's and #9's logs open with a line
    of '=' (their scripts print one before the source), dropped before `script_from_log` cuts at
    the next."""
    text = log_path(name, root).read_text()
    return script_from_log(re.sub(r"\A={20,}\n", "", text))


def download_logs(dest: Path, url_base: str = LOG_URL_BASE) -> list[Path]:
    """Download the five logs into dest/<folder>/<file> (the layout `logs_root` reads)."""
    import urllib.request

    written = []
    for log in RECORD_LOGS.values():
        path = Path(dest) / log.folder / log.file
        path.parent.mkdir(parents=True, exist_ok=True)
        with urllib.request.urlopen(f"{url_base}/{log.folder}/{log.file}", timeout=60) as response:  # noqa: S310
            path.write_bytes(response.read())
        written.append(path)
    return written


# ---------------------------------------------------------------------------------------------
# What stands in for torch.distributed and FlexAttention (bound before the script runs)


class _Done:
    """The handle of a finished collective."""

    def wait(self) -> bool:
        return True


class OneRank:
    """torch.distributed as the only rank of a group sees it: an all-reduce (SUM or AVG) leaves the
    tensor as it is, an all-gather copies it into the one slot. Bound as the scripts' `dist`."""

    class ReduceOp:
        SUM, AVG = "sum", "avg"

    @staticmethod
    def get_rank() -> int:
        return 0

    @staticmethod
    def get_world_size() -> int:
        return 1

    @staticmethod
    def all_reduce(tensor, op=None, async_op=False):
        return _Done() if async_op else None

    @staticmethod
    def all_gather(tensors, tensor, async_op=False):
        if len(tensors) != 1:
            raise ValueError(f"one rank gathers into one slot, got {len(tensors)}")
        tensors[0].copy_(tensor)
        return _Done() if async_op else None

    @staticmethod
    def all_gather_into_tensor(output, tensor, async_op=False):
        output.view(-1).copy_(tensor.view(-1))
        return _Done() if async_op else None


@dataclass(frozen=True)
class KvBlocks:
    """What a record's code hands FlexAttention's `BlockMask.from_kv_blocks`: per query block, the
    count and order of its partial key blocks (mask_mod applied) and of its full ones (none
    applied). Counts (1, 1, Q) int32, indices (1, 1, Q, K) int32; negative counts list nothing.
    Bound as the scripts' `BlockMask`."""

    kv_num_blocks: Any
    kv_indices: Any
    full_kv_num_blocks: Any = None
    full_kv_indices: Any = None
    block_size: int = 128
    mask_mod: Callable | None = None

    @classmethod
    def from_kv_blocks(cls, kv_num_blocks, kv_indices, full_kv_num_blocks=None, full_kv_indices=None,
                       BLOCK_SIZE: int = 128, mask_mod: Callable | None = None) -> KvBlocks:  # noqa: N803 - FlexAttention's name
        return cls(kv_num_blocks, kv_indices, full_kv_num_blocks, full_kv_indices, BLOCK_SIZE, mask_mod)

    def allowed(self, seq_len: int):
        """(T, T) bool, computed once per instance and length (the records hand every layer the
        same block mask): key k is attended from query q. A partial block's pairs pass the mask_mod,
        a full block's all pass; the two lists must not share a block (FlexAttention would
        visit it twice)."""
        cache = self.__dict__.setdefault("_allowed_by_length", {})  # frozen: the fields stay as the record built them
        if seq_len not in cache:
            cache[seq_len] = self._allowed(seq_len)
        return cache[seq_len]

    def _allowed(self, seq_len: int):
        import torch

        blocks = -(-seq_len // self.block_size)
        partial = _listed_blocks(self.kv_num_blocks, self.kv_indices, blocks)
        full = (torch.zeros_like(partial) if self.full_kv_num_blocks is None
                else _listed_blocks(self.full_kv_num_blocks, self.full_kv_indices, blocks))
        if (partial & full).any():
            raise ValueError("a key block is listed as both partial and full")
        q_idx, kv_idx = torch.arange(seq_len)[:, None], torch.arange(seq_len)[None, :]
        token = self.mask_mod(0, 0, q_idx, kv_idx) if self.mask_mod is not None else torch.ones(seq_len, seq_len, dtype=torch.bool)

        def tokens(block_mask):  # (Q, K) blocks -> (T, T) tokens
            return block_mask.repeat_interleave(self.block_size, 0).repeat_interleave(self.block_size, 1)[:seq_len, :seq_len]

        return (tokens(partial) & token) | tokens(full)


def _listed_blocks(counts, indices, blocks: int):
    """(Q, K) bool of the blocks a (1, 1, Q) count and (1, 1, Q, K) index list name: the first
    clamp(count, 0, K) indices of each row."""
    import torch

    counts = counts.reshape(-1).long().clamp(0, indices.shape[-1])
    order = indices.reshape(counts.numel(), -1).long()
    taken = torch.arange(order.shape[1])[None, :] < counts[:, None]
    dense = torch.zeros(counts.numel(), blocks, dtype=torch.bool)
    return dense.scatter_(1, order, taken)  # each row's indices are a permutation: no column twice


def dense_flex_attention(query, key, value, block_mask: KvBlocks, scale: float | None = None):
    """FlexAttention's output for (B, H, T, Dh) inputs and a record's block lists, computed as one
    masked softmax in the inputs' dtype (fp32 here); scale defaults to Dh^-0.5 as FlexAttention's.
    Bound as the scripts' `flex_attention`."""
    import torch

    allowed = block_mask.allowed(query.shape[-2])
    scale = query.shape[-1] ** -0.5 if scale is None else scale
    scores = (query @ key.transpose(-2, -1)) * scale
    return torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1) @ value


@contextlib.contextmanager
def torchrun_env() -> Iterator[None]:
    """RANK=0, WORLD_SIZE=1, LOCAL_RANK=0 (what torchrun sets for one process; the records' Muon
    reads them), restored afterwards."""
    names = {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0"}
    saved = {name: os.environ.get(name) for name in names}
    os.environ.update(names)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


# ---------------------------------------------------------------------------------------------
# The changes: each a Patch applied exactly once (upstream_record.patch_script), in this order


def _drop(name: str, reason: str, pattern: str, lines: int = 1) -> Patch:
    """Remove the `lines` lines `pattern` matches, leaving them empty: every later line keeps the
    number it has in the log's script (what `patch_script` reports)."""
    return Patch(name, reason, pattern, "\n" * lines)


_MAIN = _drop("the `# int main` part not run", "the training loop and its set-up (process group, CUDA device, data "
              "loaders, logging, torch.compile, DDP) are not executed; the few statements the harness takes from "
              "it are SNIPPETS", r"(?s)^# int main\n.*\Z", lines=0)
_CODE = _drop("no read of sys.argv[0]", "the script reads its own file for its log, which the harness does not "
              "write", r"^with open\(sys\.argv\[0\]\) as f:\n[ \t]+code = f\.read\(\).*\n", lines=2)
_DIST = _drop("`dist` bound to OneRank", "torch.distributed without a process group: the harness binds a one-rank "
              "stand-in (an all-reduce of one rank is the tensor, an all-gather a copy)",
              r"^import torch\.distributed as dist\n")
_EAGER_NS = _drop("eager Newton-Schulz", "@torch.compile dropped from zeropower_via_newtonschulz5: inductor on a "
                  "CPU builds C++ per shape; the eager fp32 math is the same", r"^@torch\.compile\n(?=def zeropower_via_newtonschulz5)")
_FP32_NS = Patch("fp32 Newton-Schulz", "an fp32 run: X = G in fp32 (a copy) instead of G.bfloat16(), as the "
                 "frameworks' ns_dtype 'fp32' (the dtype is the bound name NS_DTYPE: float64 measures the run's "
                 "sensitivity to Newton-Schulz rounding)", r"^(?P<i>[ \t]+)X = G\.bfloat16\(\)",
                 r"\g<i>X = G.to(NS_DTYPE, copy=True)")
_MUON_BUFFER = Patch("Muon's update buffer on the CPU in fp32", "device string, and fp32 instead of bf16 for the "
                     "fp32 Newton-Schulz results",
                     r"(?:device=(?P<q>[\"'])cuda(?P=q), dtype=torch\.bfloat16|dtype=torch\.bfloat16, device=(?P<r>[\"'])cuda(?P=r))\)",
                     'device="cpu", dtype=torch.float32)')
_FLEX = _drop("`BlockMask`, `flex_attention` bound to KvBlocks, dense_flex_attention", "FlexAttention's kernels need "
              "a GPU or a compile: the record's block lists and mask_mod are kept as it builds them and the attention "
              "is one dense masked softmax over exactly the pairs they allow",
              r"^from torch\.nn\.attention\.flex_attention import BlockMask, flex_attention\n")
_BLOCK_INDEX = Patch("block-mask index on the CPU", "device string", r"(?P<a>torch\.arange\([\w /]+, dtype=torch\.int32, "
                     r"device=)(?P<q>[\"'])cuda(?P=q)", r'\g<a>"cpu"')
_CUDA_WARMUP = _drop("no CUDA warm-up at import", "a CUDA-only call (an empty backward on the GPU)",
                     r"^torch\.empty\(1, device=(?P<q>[\"'])cuda(?P=q), requires_grad=True\)\.backward\(\).*\n")


def _eot(eot_id: int) -> list[Patch]:
    """The documents' separator 50256 written into #15-#20's masks, for a smaller vocabulary."""
    if eot_id == 50256:
        return []
    return [Patch(f"EOT id {eot_id}", f"the miniature's vocabulary: documents start with token {eot_id}, not 50256",
                  r"(?P<a>\(\w+ == )50256(?P<b>\)\.cumsum\(0\))", rf"\g<a>{eot_id}\g<b>")]


_SUB3MIN_ONLY = [
    _drop("no CUDA allocator setting", "PYTORCH_CUDA_ALLOC_CONF is for CUDA; set at import it would change this "
          "process's environment", r"^os\.environ\[\"PYTORCH_CUDA_ALLOC_CONF\"\] = .*\n"),
    _drop("no inductor setting", "a process-wide torch.compile setting; nothing is compiled",
          r"^torch\._inductor\.config\.coordinate_descent_tuning = True\n"),
]
_SOFTCAP_ONLY = [
    Patch("fp32 stream (embedding output)", "an fp32 run: #18 casts the embedding's output to bf16, which makes its "
          "residual stream bf16 (its dtype policy; a no-op in its run, whose tables are bf16)",
          r"self\.embed\(inputs\[None\]\)\.bfloat16\(\)", "self.embed(inputs[None])"),
    Patch("fp32 stream (value embeddings)", "the same cast on the value embeddings", r"emb\(inputs\)\.bfloat16\(\)",
          "emb(inputs)"),
]
# #15's tables as its compiled run built them (docs/NUMERICS.md): inductor's Triton code converts
# the int64 positions straight to fp32 (bf16 math is fp32 inside a kernel), multiplies by the bf16
# inv_freq in fp32 and rounds only the stored cos/sin to bf16; eager torch would round the
# positions and the angles to bf16 first.
_UNET_ONLY = [
    Patch("compiled rotary table build", "#15's run built its tables inside torch.compile (docs/NUMERICS.md): fp32 "
          "positions and angles from its bf16 inv_freq, cos/sin rounded to the buffer's bf16",
          r"^(?P<i>[ \t]+)freqs = torch\.outer\(t, self\.inv_freq\)\n(?P<s>(?P=i)self\.seq_len_cached = seq_len\n)"
          r"(?P=i)self\.cos_cached = freqs\.cos\(\)\n(?P=i)self\.sin_cached = freqs\.sin\(\)$",
          r"\g<i>freqs = torch.outer(t.float(), self.inv_freq.float())\n\g<s>"
          r"\g<i>self.cos_cached = freqs.cos().to(self.inv_freq.dtype)\n\g<i>self.sin_cached = freqs.sin().to(self.inv_freq.dtype)"),
]


def changes(name: str, eot_id: int = 50256) -> list[Patch]:
    """Every text change the harness makes to record `name`'s script, in the order applied."""
    common = [_MAIN, _CODE, _DIST, _EAGER_NS, _FP32_NS, _MUON_BUFFER]
    if name in ("untie-embed", "shortcuts"):
        return common
    flex = [_FLEX, _BLOCK_INDEX, *_eot(eot_id)]
    specific = {"unet-value-embeds": _UNET_ONLY, "softcap": [_CUDA_WARMUP, *_SOFTCAP_ONLY],
                "record": [*_SUB3MIN_ONLY, _CUDA_WARMUP]}
    if name not in specific:
        raise ValueError(f"unknown record {name!r}; choose one of {sorted(RECORD_LOGS)}")
    return [*common, *flex, *specific[name]]


# Names bound in the script's namespace before it runs (stand-ins for the dropped imports; #18's
# Muon reads a module-level `rank` that its main part defines).
BOUND_NAMES = {"dist": "OneRank", "BlockMask": "KvBlocks (#15-#20)", "flex_attention": "dense_flex_attention (#15-#20)",
               "rank": "0 (#18's Muon reads the main part's `rank`)",
               "NS_DTYPE": "torch.float32 (the fp32 Newton-Schulz; `train` may set float64)"}


# ---------------------------------------------------------------------------------------------
# The statements taken from the `# int main` part (each found exactly once there, dedented, run
# in a copy of the script's namespace): its hyperparameters, its optimizers and LR schedulers,
# and what its loop does each step for the window, the Muon momentum and the optimizer steps.

SNIPPETS = {
    "hyperparameters": r"(?ms)^@dataclass\nclass Hyperparameters:\n.*?^args = Hyperparameters\(\)\n",
    "optimizers": r"(?ms)^# (?:init the optimizer\(s\)|collect the parameters to optimize)\n.*?^schedulers = .*?\n",
    "momentum": r"(?m)^[ \t]+# momentum warmup for Muon\n(?:[ \t]+.*\n)+?(?=[ \t]+# step the optimizers)",
    "step": r"(?m)^[ \t]+# step the optimizers and schedulers\n(?:[ \t]+.*\n)+?(?=[ \t]+# null the gradients)",
    # The window each record's loop sets before its forward: tokens (#15), blocks (#18), the
    # window in tokens whose 128-blocks the model takes (#20).
    "window_tokens": r"(?m)^[ \t]+sw_size = .*\n",
    "window_blocks": r"(?ms)^def get_sliding_window_blocks\(it\):\n.*?^[ \t]+return .*?\n",
    "window_size": r"(?m)^[ \t]+window_size = next_multiple_of_n\(.*\n",
}
# Which of them each record's loop has (#8 has no momentum warmup; #8/#9 no window).
RECORD_SNIPPETS = {
    "untie-embed": ("hyperparameters", "optimizers", "step"),
    "shortcuts": ("hyperparameters", "optimizers", "momentum", "step"),
    "unet-value-embeds": ("hyperparameters", "optimizers", "momentum", "step", "window_tokens"),
    "softcap": ("hyperparameters", "optimizers", "momentum", "step", "window_blocks"),
    "record": ("hyperparameters", "optimizers", "momentum", "step", "window_size"),
}


def main_part(script: str) -> str:
    """The script from its `# int main` line on (ValueError when it has none or several)."""
    found = [m.start() for m in re.finditer(r"(?m)^# int main$", script)]
    if len(found) != 1:
        raise ValueError(f"expected one `# int main` line in the record's script, found {len(found)}")
    return script[found[0]:]


def snippets(name: str, script: str) -> dict[str, str]:
    """Record `name`'s SNIPPETS from its script, dedented; ValueError naming one that is not found
    exactly once."""
    main = main_part(script)
    out = {}
    for key in RECORD_SNIPPETS[name]:
        found = [m.group(0) for m in re.finditer(SNIPPETS[key], main)]
        if len(found) != 1:
            raise ValueError(f"record {name!r}: statement {key!r} found {len(found)} times in the `# int main` part "
                             "(expected once): not the record's script?")
        out[key] = textwrap.dedent(found[0])
    return out


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
def load(name: str, eot_id: int = 50256, root: Path | None = None) -> LoadedRecord:
    """Record `name`'s code, patched and executed once per process (#20 registers custom torch
    ops at import, which a second execution would register again). Raises FileNotFoundError
    when its log is absent, ValueError when a change or statement is not found exactly once."""
    script = record_script(name, root)
    source, applied = patch_script(script, changes(name, eot_id), what=f"record {name!r}'s script")
    module = types.ModuleType(f"record_code_{name.replace('-', '_')}")
    import torch

    module.__dict__.update(dist=OneRank, BlockMask=KvBlocks, flex_attention=dense_flex_attention, rank=0,
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


def _call(name: str, model, inputs, targets, window: int | None):
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
            loss = _call(loaded.name, model, inputs, targets, window)
            if backward:
                loss.backward()
    finally:
        hook.remove()
    logits = captured["logits"].float()
    grads = ({key: p.grad.float().numpy().copy() for key, p in model.named_parameters()} if backward else None)
    return Output(float(loss.detach()), logits.reshape(-1, logits.shape[-1]).numpy(), grads)


# ---------------------------------------------------------------------------------------------
# A few steps of the record's own optimizers and schedules


@dataclass(frozen=True)
class Trajectory:
    """A short run: `losses` (steps + 1,) the mean loss of each step's batch before its update,
    then of the first batch after the last update (at the window of step `steps`, as the
    record's last validation); `params` the final parameters by record name (fp32 numpy);
    `windows` the window of each forward (None for #8/#9)."""

    losses: Any
    params: dict[str, Any]
    windows: tuple[int | None, ...]


def _schedules(loaded: LoadedRecord, model, steps: int | None, cooldown_steps: int | None) -> dict[str, Any]:
    """A namespace holding the record's `args` (num_iterations = steps; #8/#9's warmdown_iters and
    #15's cooldown_iters = cooldown_steps; None keeps the record's own), its optimizers and LR
    schedulers, built by its own statements over `model`, and its window function."""
    env = dict(vars(loaded.module), model=model, raw_model=model, rank=0, world_size=1)
    exec(loaded.snippets["hyperparameters"], env)  # noqa: S102 - the record's own statements (module docstring)
    args = env["args"]
    if steps is not None:
        args.num_iterations = steps
    env["train_steps"] = args.num_iterations
    for name in ("warmdown_iters", "cooldown_iters"):
        if hasattr(args, name) and cooldown_steps is not None:
            setattr(args, name, cooldown_steps)
    with torchrun_env():
        exec(loaded.snippets["optimizers"], env)  # noqa: S102
    if "window_blocks" in loaded.snippets:
        exec(loaded.snippets["window_blocks"], env)  # noqa: S102 - defines get_sliding_window_blocks
    return env


def window_at(loaded: LoadedRecord, env: dict[str, Any], step: int) -> int | None:
    """The window the record's loop hands its forward at `step`: #15's tokens, #18's blocks, #20's
    window_size // 128 blocks (its sw_num_blks), None for #8/#9."""
    env["step"] = step
    if "window_tokens" in loaded.snippets:
        exec(loaded.snippets["window_tokens"], env)  # noqa: S102
        return int(env["sw_size"])
    if "window_blocks" in loaded.snippets:
        return int(env["get_sliding_window_blocks"](step))
    if "window_size" in loaded.snippets:
        exec(loaded.snippets["window_size"], env)  # noqa: S102
        return int(env["window_size"]) // 128
    return None


def schedule(loaded: LoadedRecord, dims: Dims) -> list[tuple[float, float, int | None]]:
    """(LR multiplier, Muon momentum, window) of every update 0..N-1 of the record's own run
    (its own num_iterations and cooldown), from its own statements: get_lr as its LambdaLR calls it,
    the momentum its loop sets, the window its loop hands the forward. The optimizers are built
    over a model at `dims` (any will do; nothing is trained)."""
    env = _schedules(loaded, build_model(loaded, dims), None, None)
    muon = next(opt for opt in env["optimizers"] if isinstance(opt, loaded.module.Muon))
    values = []
    for step in range(env["args"].num_iterations):
        window = window_at(loaded, env, step)
        if "momentum" in loaded.snippets:
            exec(loaded.snippets["momentum"], env)  # noqa: S102 - the record's loop statements
        values.append((float(env["get_lr"](step)), float(muon.param_groups[0]["momentum"]), window))
    return values


def _device_gradients(loaded: LoadedRecord, model, inputs, targets, window) -> tuple[list[Any], float]:
    """One device's mean gradient over its batch (per parameter, fp32) and mean loss: #8/#9's rows
    in one forward, #15-#20's sequences one forward each, their gradients summed in .grad in
    order and divided by their count (#8's accumulation rule)."""
    import torch

    model.zero_grad(set_to_none=True)
    chunks = [(inputs, targets)] if loaded.name in ROWS else list(zip(inputs, targets, strict=True))
    losses = []
    for chunk_inputs, chunk_targets in chunks:
        loss = _call(loaded.name, model, chunk_inputs, chunk_targets, window)
        loss.backward()
        losses.append(float(loss.detach()))
    with torch.no_grad():
        grads = [p.grad / len(chunks) for p in model.parameters()]
    return grads, sum(losses) / len(losses)


def _mean_loss(loaded: LoadedRecord, model, inputs, targets, window) -> float:
    """The mean loss over a batch (rows or sequences), without gradients."""
    import torch

    with torch.no_grad():
        chunks = [(inputs, targets)] if loaded.name in ROWS else list(zip(inputs, targets, strict=True))
        return sum(float(_call(loaded.name, model, x, y, window)) for x, y in chunks) / len(chunks)


def _step_gradients(loaded: LoadedRecord, model, inputs, targets, window, devices: int) -> float:
    """Set every .grad to the step's gradient on `devices` (1 or 2) devices: each device's mean
    gradient over its share of the batch, averaged as DDP does (each divided by the device count,
    then summed). Returns the mean loss."""
    import torch

    size = len(inputs) // devices
    shares = [(inputs[i * size:(i + 1) * size], targets[i * size:(i + 1) * size]) for i in range(devices)]
    results = [_device_gradients(loaded, model, share_inputs, share_targets, window) for share_inputs, share_targets in shares]
    with torch.no_grad():
        for index, param in enumerate(model.parameters()):
            total = results[0][0][index] / devices
            for grads, _ in results[1:]:
                total = total + grads[index] / devices
            param.grad = total
    return sum(loss for _, loss in results) / devices


@contextlib.contextmanager
def _ns_dtype(loaded: LoadedRecord, dtype: str) -> Iterator[None]:
    import torch

    loaded.module.NS_DTYPE = getattr(torch, dtype)
    try:
        yield
    finally:
        loaded.module.NS_DTYPE = torch.float32


def train(loaded: LoadedRecord, dims: Dims, state: dict[str, Any], batches: list[tuple[Any, Any]], *,
          cooldown_steps: int, devices: int = 1, ns_dtype: str = "float32") -> Trajectory:
    """len(batches) steps of the record's own optimizers and schedules from `state` (record names).
    Each batch is (inputs, targets) of S rows (#8/#9) or S sequences (#15-#20), int numpy (S, T).
    `cooldown_steps`: #8-#15's warmdown / cooldown length for this run (the presets' round(
    cooldown_frac x steps)); `devices`: 1 or 2 (see _step_gradients); `ns_dtype`: the Newton-Schulz
    iteration's dtype ("float64": the same update computed more accurately)."""
    if devices not in (1, 2) or any(len(inputs) % devices for inputs, _ in batches):
        raise ValueError(f"devices must be 1 or 2 and divide every batch, got {devices}")
    with _ns_dtype(loaded, ns_dtype):
        return _train(loaded, dims, state, batches, cooldown_steps, devices)


def _train(loaded: LoadedRecord, dims: Dims, state: dict[str, Any], batches: list[tuple[Any, Any]],
           cooldown_steps: int, devices: int) -> Trajectory:
    import numpy as np

    model = build_model(loaded, dims)
    load_state(model, state)
    steps = len(batches)
    env = _schedules(loaded, model, steps, cooldown_steps)
    losses, windows = [], []
    for step, (inputs, targets) in enumerate(batches):
        window = window_at(loaded, env, step)
        losses.append(_step_gradients(loaded, model, inputs, targets, window, devices))
        windows.append(window)
        with torchrun_env():
            for key in ("momentum", "step"):
                if key in loaded.snippets:
                    exec(loaded.snippets[key], env)  # noqa: S102 - the record's loop statements
        model.zero_grad(set_to_none=True)
    window = window_at(loaded, env, steps)
    losses.append(_mean_loss(loaded, model, *batches[0], window))
    windows.append(window)
    params = {key: p.detach().float().numpy().copy() for key, p in model.named_parameters()}
    return Trajectory(np.array(losses), params, tuple(windows))
