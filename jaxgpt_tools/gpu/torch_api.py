"""The torch APIs that only a GPU run calls, checked in the running interpreter against its torch.

The lent GPU machine has a torch (2.11 when this was written) that CI's CPU venv does not; a
lease that ends while the record's script or torch_ref's CUDA path is still compiling shows
nothing about whether their calls are accepted there. `API_USES` lists every torch API that the
record's training script (the Sub3Min `train_gpt.py`, as `scripts/fetch_record.py` writes it)
and torch_ref's CUDA-only branches call: its dotted name, how many positional arguments and
which keywords the code passes, and where (file:line). `check_use` resolves each name (importing
modules as needed; a config flag by attribute lookup) and binds the arguments to its signature:
`inspect.signature` where Python has one, else the docstring's signature line that torch's C++
bindings carry (`torch.tensor`, `torch.empty`), else the ATen op schema (`torch._scaled_mm`:
`torch.ops.aten._scaled_mm.<overload>._schema`); the call is accepted when any of them binds.

`torch_exercises.EXERCISES` go further where a CPU allows, each in seconds: the record's FP8 custom ops
(`torch.library.custom_op`, `register_fake`, `register_autograd`, executed from the record's own
text with the op namespace renamed) under FakeTensorMode, eagerly (its `torch._scaled_mm` calls on
the CPU kernel) and compiled by Inductor for the CPU; torch_ref's `_scaled_mm` branch on CPU
tensors against its emulation; torch_ref's `BlockMask.from_kv_blocks` with eager and compiled
`flex_attention` against SDPA with the same allowed set; torch_ref's compiled Newton-Schulz; its
Inductor setting; its all-gather on a one-process gloo group. Nothing here compiles for a GPU.

Rows: {name, where, ok, problem, checked}; ok is None for a skipped exercise (say why in
`checked`). `scripts/torch_api_check.py` prints them and writes the JSON; `make torch-api-check`
runs it under the GPU machine's torch in a venv of its own.
"""

from __future__ import annotations

import importlib
import inspect
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from jaxgpt_tools.common.artifacts import REPO_ROOT
from jaxgpt_tools.common.command import one_line

# The record's script where `scripts/fetch_record.py` writes it; its lines are the log's (the
# script is the top of the log), fixed by the SHA-256 that upstream_record checks.
RECORD = "runs/upstream/2025-01-16_Sub3Min/train_gpt.py"


@dataclass(frozen=True)
class Site:
    """Where a use is: a repository-relative file and text on the line. `line` is fixed for the
    record's script (pinned by its SHA-256, and not committed here); None for torch_ref, whose
    lines are found by `needle` each time (every line of the file that holds it)."""

    path: str
    needle: str
    line: int | None = None


@dataclass(frozen=True)
class ApiUse:
    """One way the code uses a torch API: `name` (dotted), `positional` arguments and `keywords`
    passed (a method's own object not counted), and where. `call` False: only resolved (a class
    used as a type, a dtype, a config flag, an enum member). `optional`: absent is fine, the code
    falls back (said in `note`)."""

    name: str
    sites: tuple[Site, ...]
    positional: int = 0
    keywords: tuple[str, ...] = ()
    call: bool = True
    optional: bool = False
    note: str = ""


def record_at(line: int, needle: str) -> Site:
    return Site(RECORD, needle, line)


def ref_at(path: str, needle: str) -> Site:
    return Site(f"torch_ref/{path}", needle)


_OPS = "torch._library.custom_ops.CustomOpDef"
_CTX = "torch.autograd.function.FunctionCtx"
_FLEX = "torch.nn.attention.flex_attention"

API_USES: tuple[ApiUse, ...] = (
    # The record's FP8 lm_head: two custom ops, their fake (meta) functions and autograd formula.
    ApiUse("torch.library.custom_op", (record_at(24, '"nanogpt::mm"'), record_at(51, '"nanogpt::mm_backward"')),
           1, ("mutates_args",)),
    ApiUse(f"{_OPS}.register_fake", (record_at(43, "mm_op.register_fake"), record_at(81, "mm_backward_op.register_fake")), 1),
    ApiUse(f"{_OPS}.register_autograd", (record_at(100, "register_autograd"),), 1, ("setup_context",)),
    ApiUse(f"{_CTX}.save_for_backward", (record_at(96, "save_for_backward"),), 2),
    ApiUse(f"{_CTX}.set_materialize_grads", (record_at(98, "set_materialize_grads"),), 1),
    ApiUse("torch._scaled_mm", (record_at(31, "torch._scaled_mm("), record_at(60, "torch._scaled_mm("),
                                record_at(69, "torch._scaled_mm("), ref_at("fp8.py", "torch._scaled_mm(")),
           2, ("out_dtype", "scale_a", "scale_b", "use_fast_accum")),
    ApiUse("torch.float8_e4m3fn", (record_at(29, "torch.float8_e4m3fn"), ref_at("fp8.py", "torch.float8_e4m3fn")), call=False),
    ApiUse("torch.float8_e5m2", (record_at(59, "torch.float8_e5m2"), ref_at("fp8.py", "torch.float8_e5m2")), call=False),
    # Compilation.
    ApiUse("torch.compile", (record_at(26, "@torch.compile"), record_at(53, "@torch.compile"), record_at(110, "@torch.compile"),
                             record_at(543, "torch.compile(model)"), ref_at("compilation.py", "torch.compile(model)"),
                             ref_at("muon.py", "torch.compile(_newton_schulz)")), 1),
    ApiUse("torch.compile", (ref_at("attention.py", "torch.compile(flex_attention, dynamic=False)"),), 1, ("dynamic",)),
    ApiUse("torch._inductor.config.coordinate_descent_tuning",
           (record_at(19, "coordinate_descent_tuning = True"), ref_at("compilation.py", '"coordinate_descent_tuning"')),
           call=False),
    # FlexAttention with the record's hand-built block masks.
    ApiUse(f"{_FLEX}.flex_attention", (record_at(285, "flex_attention("), ref_at("attention.py", "block_mask=mask, scale=scale")),
           3, ("block_mask", "scale")),
    ApiUse(f"{_FLEX}.BlockMask", (record_at(18, "BlockMask"), ref_at("masks.py", "import BlockMask")), call=False),
    ApiUse(f"{_FLEX}.BlockMask.from_kv_blocks", (record_at(384, "BlockMask.from_kv_blocks("),
                                                 ref_at("masks.py", "BlockMask.from_kv_blocks(")),
           4, ("BLOCK_SIZE", "mask_mod")),
    ApiUse("torch.nn.functional.rms_norm", (record_at(223, "F.rms_norm("),), 2),
    ApiUse("torch.nn.Buffer", (record_at(246, "nn.Buffer("), record_at(247, "nn.Buffer(")), 1, ("persistent",)),
    # The process group and its collectives (NCCL on the GPU).
    ApiUse("torch.distributed.init_process_group", (record_at(478, "dist.init_process_group("),), 0, ("backend", "device_id")),
    ApiUse("torch.distributed.init_process_group", (ref_at("loop.py", "dist.init_process_group("),), 1,
           ("init_method", "rank", "world_size", "device_id", "timeout")),
    ApiUse("torch.distributed.barrier", (record_at(479, "dist.barrier()"), ref_at("loop.py", "dist.barrier()"))),
    ApiUse("torch.distributed.broadcast", (record_at(516, "dist.broadcast("), ref_at("loop.py", "dist.broadcast(")), 2),
    ApiUse("torch.distributed.all_gather_into_tensor", (record_at(215, "dist.all_gather_into_tensor("),
                                                        ref_at("muon.py", "dist.all_gather_into_tensor")),
           2, ("async_op",)),
    ApiUse("torch.distributed.all_gather_single", (ref_at("muon.py", '"all_gather_single"'),), 2, ("async_op",),
           optional=True, note="newer torch's name; torch_ref falls back to all_gather_into_tensor"),
    ApiUse("torch.distributed.all_reduce", (record_at(580, "dist.all_reduce("), record_at(600, "dist.all_reduce("),
                                            ref_at("loop.py", "dist.all_reduce(")), 1, ("op",)),
    ApiUse("torch.distributed.ReduceOp.AVG", (record_at(580, "dist.ReduceOp.AVG"), ref_at("loop.py", "dist.ReduceOp.AVG")),
           call=False),
    ApiUse("torch.distributed.new_group", (ref_at("loop.py", 'dist.new_group(backend="gloo")'),), 0, ("backend",)),
    ApiUse("torch.distributed.destroy_process_group", (record_at(619, "dist.destroy_process_group()"),
                                                       ref_at("loop.py", "dist.destroy_process_group()"))),
    ApiUse("torch.distributed.distributed_c10d._get_default_store", (ref_at("run/peers.py", "_get_default_store()"),)),
    # CUDA device, memory, timing and host-pinned buffers.
    ApiUse("torch.cuda.is_available", (record_at(475, "torch.cuda.is_available()"), ref_at("run/cli.py", "torch.cuda.is_available()"))),
    ApiUse("torch.cuda.device_count", (ref_at("run/preflight.py", "torch.cuda.device_count()"),)),
    ApiUse("torch.cuda.set_device", (record_at(477, "torch.cuda.set_device("), ref_at("loop.py", "torch.cuda.set_device(")), 1),
    ApiUse("torch.cuda.synchronize", (record_at(546, "torch.cuda.synchronize()"), record_at(566, "torch.cuda.synchronize()"),
                                      record_at(584, "torch.cuda.synchronize()"))),
    ApiUse("torch.cuda.synchronize", (ref_at("run/runlog.py", "torch.cuda.synchronize("),
                                      ref_at("run/profiling.py", "torch.cuda.synchronize(")), 1),
    ApiUse("torch.cuda.max_memory_allocated", (record_at(616, "max_memory_allocated()"), ref_at("loop.py", "max_memory_allocated()"))),
    ApiUse("torch.cuda.max_memory_reserved", (record_at(617, "max_memory_reserved()"), ref_at("loop.py", "max_memory_reserved()"))),
    ApiUse("torch.cuda.Event", (ref_at("run/runlog.py", "torch.cuda.Event()"),)),
    ApiUse("torch.cuda.Event.record", (ref_at("run/runlog.py", "event.record()"),)),
    ApiUse("torch.cuda.Event.query", (ref_at("run/runlog.py", "event.query()"),)),
    ApiUse("torch.cuda.Event.synchronize", (ref_at("run/runlog.py", "event.synchronize()"),)),
    ApiUse("torch.version.cuda", (record_at(501, "torch.version.cuda"),), call=False),
    ApiUse("torch.empty", (record_at(13, 'torch.empty(1, device="cuda", requires_grad=True)'),), 1, ("device", "requires_grad")),
    ApiUse("torch.empty", (record_at(171, "torch.empty(self.world_size, size"),), 2, ("dtype", "device")),
    ApiUse("torch.empty", (record_at(431, "pin_memory=True"), ref_at("run/runlog.py", "pin_memory=True")), 1, ("dtype", "pin_memory")),
    ApiUse("torch.tensor", (record_at(541, "pin_memory=True"),), 1, ("dtype", "pin_memory")),
    ApiUse("torch.tensor", (ref_at("fp8.py", "torch.tensor(a_scale"), ref_at("loop.py", "torch.tensor(window, ")), 1,
           ("dtype", "device")),
    ApiUse("torch.Tensor.cuda", (record_at(541, ".cuda(non_blocking=True)"),), 0, ("non_blocking",)),
    ApiUse("torch.Tensor.pin_memory", (ref_at("data.py", ".pin_memory()"),)),
    ApiUse("torch.from_file", (record_at(426, "torch.from_file("),), 3, ("dtype",)),
    # The optimizer's fused CUDA kernel, and the profiler's CUDA activity.
    ApiUse("torch.optim.Adam", (record_at(528, "torch.optim.Adam("),), 1, ("betas", "fused", "eps")),
    ApiUse("torch.optim.Adam", (ref_at("optim.py", "torch.optim.Adam("),), 1, ("betas", "eps", "weight_decay", "fused")),
    ApiUse("torch.profiler.profile", (ref_at("run/profiling.py", "profile(activities=activities)"),), 0, ("activities",)),
    ApiUse("torch.profiler.ProfilerActivity.CUDA", (ref_at("run/profiling.py", "ProfilerActivity.CUDA"),), call=False),
)


# ---------------------------------------------------------------------------------------------
# Where


def site_lines(site: Site) -> list[int]:
    """The site's line numbers: its fixed line, else every line of its file that holds the needle
    (none when the file is absent or no longer holds it)."""
    if site.line is not None:
        return [site.line]
    path = REPO_ROOT / site.path
    if not path.is_file():
        return []
    return [i for i, text in enumerate(path.read_text().splitlines(), start=1) if site.needle in text]


def where(sites: Iterable[Site]) -> str:
    """`file:line,line; file:line` for the sites, files in first-seen order; a torch_ref needle
    that is no longer found shows as `file:?`."""
    lines: dict[str, list[int]] = {}
    for site in sites:
        lines.setdefault(site.path, []).extend(site_lines(site))
    return "; ".join(f"{path}:{','.join(map(str, sorted(set(found)))) or '?'}" for path, found in lines.items())


# ---------------------------------------------------------------------------------------------
# Resolving a name and binding its arguments


def resolve(name: str) -> tuple[Any, Any, str]:
    """(object, its parent, its last name) for a dotted path, importing each module on the way
    that is not yet an attribute (`torch._inductor.config`). AttributeError names the first
    part that is missing."""
    parts = name.split(".")
    obj: Any = importlib.import_module(parts[0])
    parent: Any = None
    for i, part in enumerate(parts[1:], start=1):
        parent = obj
        if hasattr(obj, part):
            obj = getattr(obj, part)
            continue
        try:
            obj = importlib.import_module(".".join(parts[: i + 1]))
        except ModuleNotFoundError:
            raise AttributeError(f"{'.'.join(parts[:i])} has no attribute {part!r}") from None
    return obj, parent, parts[-1]


def _is_instance_method(parent: Any, attr: str) -> bool:
    """Looked up on a class, a function that takes the instance first (not a static or class method)."""
    if not inspect.isclass(parent):
        return False
    static = inspect.getattr_static(parent, attr, None)
    return not isinstance(static, (staticmethod, classmethod))


def _without_self(signature: inspect.Signature) -> inspect.Signature:
    params = list(signature.parameters.values())
    if params and params[0].name == "self":
        return signature.replace(parameters=params[1:])
    return signature


def _split_top_level(text: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for char in text:
        depth += char in "([{"
        depth -= char in ")]}"
        if char == "," and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += char
    if current.strip():
        parts.append(current.strip())
    return parts


def docstring_signature(obj: Any, attr: str) -> inspect.Signature | None:
    """The signature line torch writes at the top of a C++ binding's docstring, e.g.
    `tensor(data, *, dtype=None, device=None, requires_grad=False, pin_memory=False) -> Tensor`,
    as a Signature (defaults kept as text); None when there is no such line for `attr`."""
    doc = (getattr(obj, "__doc__", None) or "").strip()
    match = re.match(rf"{re.escape(attr)}\((.*?)\)\s*(?:->|$)", doc.splitlines()[0] if doc else "")
    if not match:
        return None
    kind: inspect._ParameterKind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    params = []
    for item in _split_top_level(match.group(1)):
        if item == "*":  # keyword-only from here (after `*size` it adds nothing)
            kind = inspect.Parameter.KEYWORD_ONLY
            continue
        if item.startswith("**"):
            params.append(inspect.Parameter(item[2:], inspect.Parameter.VAR_KEYWORD))
        elif item.startswith("*"):
            params.append(inspect.Parameter(item[1:], inspect.Parameter.VAR_POSITIONAL))
            kind = inspect.Parameter.KEYWORD_ONLY
        else:
            pname, _, default = item.partition("=")
            params.append(inspect.Parameter(pname.strip(), kind, default=default.strip() if default else inspect.Parameter.empty))
    try:
        return inspect.Signature(params)
    except ValueError:  # a line that is no Python signature
        return None


def schema_signatures(attr: str) -> list[tuple[str, inspect.Signature]]:
    """(schema text, Signature) for each overload of ATen op `attr` (keyword-only arguments after
    the schema's `*`, defaults where the schema has one); empty when there is no such op."""
    import torch

    try:
        packet = getattr(torch.ops.aten, attr)
    except (AttributeError, RuntimeError):
        return []
    found = []
    for overload in packet.overloads():
        schema = getattr(packet, overload)._schema
        params = [inspect.Parameter(arg.name, inspect.Parameter.KEYWORD_ONLY if arg.kwarg_only
                                    else inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                    default=None if arg.has_default_value() else inspect.Parameter.empty)
                  for arg in schema.arguments]
        found.append((str(schema), inspect.Signature(params)))
    return found


def signatures(obj: Any, parent: Any, attr: str) -> list[tuple[str, inspect.Signature]]:
    """(how, Signature) candidates for a callable: inspect's, else the docstring's and the ATen
    schemas'. A method looked up on its class loses its `self`."""
    method = _is_instance_method(parent, attr)
    try:
        found = [("signature", inspect.signature(obj))]
    except (ValueError, TypeError):  # a C++ builtin
        found = []
        doc = docstring_signature(obj, attr)
        if doc is not None:
            found.append(("docstring", doc))
        found += [(f"op schema {text}", sig) for text, sig in schema_signatures(attr)]
    return [(how, _without_self(sig) if method else sig) for how, sig in found]


def _row(use: ApiUse, ok: bool | None, problem: str, checked: str) -> dict[str, Any]:
    label = use.name if not use.call else f"{use.name}({_arguments(use)})"
    return {"name": label, "where": where(use.sites), "ok": ok, "problem": problem, "checked": checked}


def _arguments(use: ApiUse) -> str:
    return ", ".join(["_"] * use.positional + [f"{k}=" for k in use.keywords])


def check_use(use: ApiUse) -> dict[str, Any]:
    """One row: the name resolves and, for a call, its arguments bind to one of its signatures."""
    try:
        obj, parent, attr = resolve(use.name)
    except (ImportError, AttributeError) as error:
        if use.optional:
            return _row(use, True, "", f"absent (optional: {use.note})")
        return _row(use, False, f"missing: {one_line(error)}", "resolve")
    if not use.call:
        return _row(use, True, "", f"attribute ({type(obj).__name__})")
    if not callable(obj):
        return _row(use, False, f"not callable: {type(obj).__name__}", "resolve")
    candidates = signatures(obj, parent, attr)
    if not candidates:
        return _row(use, False, "no signature, docstring signature or ATen schema to check the arguments against", "resolve")
    refusals = []
    for how, sig in candidates:
        try:
            sig.bind(*[None] * use.positional, **dict.fromkeys(use.keywords))
        except TypeError as error:
            refusals.append(f"{how}: {error}")
            continue
        return _row(use, True, "", how)
    return _row(use, False, " | ".join(refusals), "arguments")


def check_uses(uses: Iterable[ApiUse] = API_USES) -> list[dict[str, Any]]:
    """A row per use, in order."""
    return [check_use(use) for use in uses]


# ---------------------------------------------------------------------------------------------
# The report


def table(rows: list[dict[str, Any]]) -> str:
    """One line per row: ok/FAIL/skip, name, where, then the problem (or how it was checked)."""
    status = {True: "ok", False: "FAIL", None: "skip"}
    return "\n".join(f"{status[row['ok']]:<4}  {row['name']}  [{row['where']}]  {row['problem'] or row['checked']}"
                     for row in rows)
