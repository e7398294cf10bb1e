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

`EXERCISES` go further where a CPU allows, each in seconds: the record's FP8 custom ops
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

import functools
import importlib
import inspect
import re
import time
import warnings
from collections.abc import Callable, Iterable
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


def _record(line: int, needle: str) -> Site:
    return Site(RECORD, needle, line)


def _ref(path: str, needle: str) -> Site:
    return Site(f"torch_ref/{path}", needle)


_OPS = "torch._library.custom_ops.CustomOpDef"
_CTX = "torch.autograd.function.FunctionCtx"
_FLEX = "torch.nn.attention.flex_attention"

API_USES: tuple[ApiUse, ...] = (
    # The record's FP8 lm_head: two custom ops, their fake (meta) functions and autograd formula.
    ApiUse("torch.library.custom_op", (_record(24, '"nanogpt::mm"'), _record(51, '"nanogpt::mm_backward"')),
           1, ("mutates_args",)),
    ApiUse(f"{_OPS}.register_fake", (_record(43, "mm_op.register_fake"), _record(81, "mm_backward_op.register_fake")), 1),
    ApiUse(f"{_OPS}.register_autograd", (_record(100, "register_autograd"),), 1, ("setup_context",)),
    ApiUse(f"{_CTX}.save_for_backward", (_record(96, "save_for_backward"),), 2),
    ApiUse(f"{_CTX}.set_materialize_grads", (_record(98, "set_materialize_grads"),), 1),
    ApiUse("torch._scaled_mm", (_record(31, "torch._scaled_mm("), _record(60, "torch._scaled_mm("),
                                _record(69, "torch._scaled_mm("), _ref("fp8.py", "torch._scaled_mm(")),
           2, ("out_dtype", "scale_a", "scale_b", "use_fast_accum")),
    ApiUse("torch.float8_e4m3fn", (_record(29, "torch.float8_e4m3fn"), _ref("fp8.py", "torch.float8_e4m3fn")), call=False),
    ApiUse("torch.float8_e5m2", (_record(59, "torch.float8_e5m2"), _ref("fp8.py", "torch.float8_e5m2")), call=False),
    # Compilation.
    ApiUse("torch.compile", (_record(26, "@torch.compile"), _record(53, "@torch.compile"), _record(110, "@torch.compile"),
                             _record(543, "torch.compile(model)"), _ref("compilation.py", "torch.compile(model)"),
                             _ref("muon.py", "torch.compile(_newton_schulz)")), 1),
    ApiUse("torch.compile", (_ref("attention.py", "torch.compile(flex_attention, dynamic=False)"),), 1, ("dynamic",)),
    ApiUse("torch._inductor.config.coordinate_descent_tuning",
           (_record(19, "coordinate_descent_tuning = True"), _ref("compilation.py", '"coordinate_descent_tuning"')),
           call=False),
    # FlexAttention with the record's hand-built block masks.
    ApiUse(f"{_FLEX}.flex_attention", (_record(285, "flex_attention("), _ref("attention.py", "block_mask=mask, scale=scale")),
           3, ("block_mask", "scale")),
    ApiUse(f"{_FLEX}.BlockMask", (_record(18, "BlockMask"), _ref("masks.py", "import BlockMask")), call=False),
    ApiUse(f"{_FLEX}.BlockMask.from_kv_blocks", (_record(384, "BlockMask.from_kv_blocks("),
                                                 _ref("masks.py", "BlockMask.from_kv_blocks(")),
           4, ("BLOCK_SIZE", "mask_mod")),
    ApiUse("torch.nn.functional.rms_norm", (_record(223, "F.rms_norm("),), 2),
    ApiUse("torch.nn.Buffer", (_record(246, "nn.Buffer("), _record(247, "nn.Buffer(")), 1, ("persistent",)),
    # The process group and its collectives (NCCL on the GPU).
    ApiUse("torch.distributed.init_process_group", (_record(478, "dist.init_process_group("),), 0, ("backend", "device_id")),
    ApiUse("torch.distributed.init_process_group", (_ref("train.py", "dist.init_process_group("),), 1,
           ("init_method", "rank", "world_size", "device_id", "timeout")),
    ApiUse("torch.distributed.barrier", (_record(479, "dist.barrier()"), _ref("train.py", "dist.barrier()"))),
    ApiUse("torch.distributed.broadcast", (_record(516, "dist.broadcast("), _ref("train.py", "dist.broadcast(")), 2),
    ApiUse("torch.distributed.all_gather_into_tensor", (_record(215, "dist.all_gather_into_tensor("),
                                                        _ref("muon.py", "dist.all_gather_into_tensor")),
           2, ("async_op",)),
    ApiUse("torch.distributed.all_gather_single", (_ref("muon.py", '"all_gather_single"'),), 2, ("async_op",),
           optional=True, note="newer torch's name; torch_ref falls back to all_gather_into_tensor"),
    ApiUse("torch.distributed.all_reduce", (_record(580, "dist.all_reduce("), _record(600, "dist.all_reduce("),
                                            _ref("train.py", "dist.all_reduce(")), 1, ("op",)),
    ApiUse("torch.distributed.ReduceOp.AVG", (_record(580, "dist.ReduceOp.AVG"), _ref("train.py", "dist.ReduceOp.AVG")),
           call=False),
    ApiUse("torch.distributed.new_group", (_ref("train.py", 'dist.new_group(backend="gloo")'),), 0, ("backend",)),
    ApiUse("torch.distributed.destroy_process_group", (_record(619, "dist.destroy_process_group()"),
                                                       _ref("train.py", "dist.destroy_process_group()"))),
    ApiUse("torch.distributed.distributed_c10d._get_default_store", (_ref("run/peers.py", "_get_default_store()"),)),
    # CUDA device, memory, timing and host-pinned buffers.
    ApiUse("torch.cuda.is_available", (_record(475, "torch.cuda.is_available()"), _ref("run/cli.py", "torch.cuda.is_available()"))),
    ApiUse("torch.cuda.device_count", (_ref("run/preflight.py", "torch.cuda.device_count()"),)),
    ApiUse("torch.cuda.set_device", (_record(477, "torch.cuda.set_device("), _ref("train.py", "torch.cuda.set_device(")), 1),
    ApiUse("torch.cuda.synchronize", (_record(546, "torch.cuda.synchronize()"), _record(566, "torch.cuda.synchronize()"),
                                      _record(584, "torch.cuda.synchronize()"))),
    ApiUse("torch.cuda.synchronize", (_ref("run/runlog.py", "torch.cuda.synchronize("),
                                      _ref("run/profiling.py", "torch.cuda.synchronize(")), 1),
    ApiUse("torch.cuda.max_memory_allocated", (_record(616, "max_memory_allocated()"), _ref("train.py", "max_memory_allocated()"))),
    ApiUse("torch.cuda.max_memory_reserved", (_record(617, "max_memory_reserved()"), _ref("train.py", "max_memory_reserved()"))),
    ApiUse("torch.cuda.Event", (_ref("run/runlog.py", "torch.cuda.Event()"),)),
    ApiUse("torch.cuda.Event.record", (_ref("run/runlog.py", "event.record()"),)),
    ApiUse("torch.cuda.Event.query", (_ref("run/runlog.py", "event.query()"),)),
    ApiUse("torch.cuda.Event.synchronize", (_ref("run/runlog.py", "event.synchronize()"),)),
    ApiUse("torch.version.cuda", (_record(501, "torch.version.cuda"),), call=False),
    ApiUse("torch.empty", (_record(13, 'torch.empty(1, device="cuda", requires_grad=True)'),), 1, ("device", "requires_grad")),
    ApiUse("torch.empty", (_record(171, "torch.empty(self.world_size, size"),), 2, ("dtype", "device")),
    ApiUse("torch.empty", (_record(431, "pin_memory=True"), _ref("run/runlog.py", "pin_memory=True")), 1, ("dtype", "pin_memory")),
    ApiUse("torch.tensor", (_record(541, "pin_memory=True"),), 1, ("dtype", "pin_memory")),
    ApiUse("torch.tensor", (_ref("fp8.py", "torch.tensor(a_scale"), _ref("train.py", "torch.tensor(window, ")), 1,
           ("dtype", "device")),
    ApiUse("torch.Tensor.cuda", (_record(541, ".cuda(non_blocking=True)"),), 0, ("non_blocking",)),
    ApiUse("torch.Tensor.pin_memory", (_ref("data.py", ".pin_memory()"),)),
    ApiUse("torch.from_file", (_record(426, "torch.from_file("),), 3, ("dtype",)),
    # The optimizer's fused CUDA kernel, and the profiler's CUDA activity.
    ApiUse("torch.optim.Adam", (_record(528, "torch.optim.Adam("),), 1, ("betas", "fused", "eps")),
    ApiUse("torch.optim.Adam", (_ref("optim.py", "torch.optim.Adam("),), 1, ("betas", "eps", "weight_decay", "fused")),
    ApiUse("torch.profiler.profile", (_ref("run/profiling.py", "profile(activities=activities)"),), 0, ("activities",)),
    ApiUse("torch.profiler.ProfilerActivity.CUDA", (_ref("run/profiling.py", "ProfilerActivity.CUDA"),), call=False),
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
# Exercised on the CPU


class Skipped(Exception):
    """An exercise that cannot run here (what it needs is absent); the reason is its message."""


# The record's custom ops are registered under this namespace instead of its "nanogpt" (which the
# parity harness, jaxgpt_tools.parity.record_code, may already have registered in this process).
OP_NAMESPACE = "jaxgpt_torch_api"


def record_source() -> str:
    """The record's script: where scripts/fetch_record.py writes it, else from its log beside the
    checkout (../shared/upstream or $JAXGPT_UPSTREAM_LOGS). Skipped when neither is there;
    ValueError when it is not the record's script."""
    from jaxgpt_tools import upstream_record
    from jaxgpt_tools.parity import record_code

    if upstream_record.DEFAULT_SCRIPT.is_file():
        source = upstream_record.DEFAULT_SCRIPT.read_text()
    else:
        try:
            source = record_code.record_script("record")
        except FileNotFoundError as error:
            raise Skipped(f"the record's script is absent ({RECORD}; its log neither): {one_line(error)}") from None
    if upstream_record.sha256(source) != upstream_record.SCRIPT_SHA256:
        raise ValueError("the record's script has another SHA-256 than the Sub3Min record's")
    return source


@functools.cache
def record_fp8_ops() -> dict[str, Any]:
    """The record's FP8 section (its `# Custom operators` line up to `# Muon optimizer`) executed
    as written, its two ops renamed into OP_NAMESPACE; line numbers are the script's. Once per
    process (a second registration of an op fails)."""
    import torch

    source = record_source()
    start, end = source.index("# Custom operators"), source.index("# Muon optimizer")
    section = source[start:end]
    for old, count in (('"nanogpt::', 2), ("torch.ops.nanogpt.", 2)):
        if section.count(old) != count:
            raise ValueError(f"the record's FP8 section holds {old!r} {section.count(old)} times, not {count}")
        section = section.replace(old, old.replace("nanogpt", OP_NAMESPACE))
    namespace: dict[str, Any] = {"torch": torch, "Tensor": torch.Tensor, "__name__": "record_fp8"}
    code = compile("\n" * source.count("\n", 0, start) + section, RECORD, "exec")
    exec(code, namespace)  # noqa: S102 - the record's own code, the point of this check
    return namespace


def _relative_error(got: Any, want: Any) -> float:
    got, want = got.detach().float(), want.detach().float()
    return float((got - want).norm() / want.norm())


def _fp8_inputs(requires_grad: bool = True) -> tuple[Any, Any]:
    import torch

    generator = torch.Generator().manual_seed(0)
    x = torch.randn(256, 128, generator=generator).bfloat16()
    w = torch.randn(512, 128, generator=generator) * 0.01
    return x.requires_grad_(requires_grad), w.requires_grad_(requires_grad)


def _record_fp8_against_fp32(lm_head: Callable[[Any, Any], Any]) -> str:
    """The record's lm_head_fp8 forward and backward on CPU tensors against fp32 matmuls."""
    import torch

    x, w = _fp8_inputs()
    out = lm_head(x, w)
    # The record's grad scale 2^29 is sized for a loss averaged over 65,536 tokens.
    (out.float().sum() / 65536).backward()
    xf, wf = x.detach().float(), w.detach()
    grad = torch.full(out.shape, 1 / 65536)
    errors = {"out": _relative_error(out, xf @ wf.t()), "grad_x": _relative_error(x.grad, grad @ wf),
              "grad_w": _relative_error(w.grad, grad.t() @ xf)}
    dtypes = (out.dtype, x.grad.dtype, w.grad.dtype)
    assert str(dtypes) == "(torch.bfloat16, torch.bfloat16, torch.float32)", f"dtypes {dtypes}"
    assert all(error < 0.1 for error in errors.values()), f"relative errors against fp32 {errors}"  # FP8: a few %
    return "relative error against fp32 " + ", ".join(f"{k} {v:.3f}" for k, v in errors.items())


def exercise_record_fp8_fake() -> str:
    """The record's ops registered; their fake functions and autograd formula under FakeTensorMode."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    ops = record_fp8_ops()
    with FakeTensorMode():
        x = torch.empty(256, 128, dtype=torch.bfloat16, requires_grad=True)
        w = torch.empty(512, 128, requires_grad=True)
        out = ops["lm_head_fp8"](x, w)
        out.float().sum().backward()
        outputs: list[Any] = [out, x.grad, w.grad]
        shapes = [(tuple(t.shape), str(t.dtype)) for t in outputs]
    want = [((256, 512), "torch.bfloat16"), ((256, 128), "torch.bfloat16"), ((512, 128), "torch.float32")]
    assert shapes == want, f"fake outputs {shapes}, expected {want}"
    return "fake forward and backward: " + ", ".join(f"{s} {d}" for s, d in shapes)


def exercise_record_fp8_eager() -> str:
    """The record's ops run with torch.compile in force-eager stance: its torch._scaled_mm calls on the CPU kernel."""
    import torch

    ops = record_fp8_ops()
    with torch.compiler.set_stance("force_eager"):
        return _record_fp8_against_fp32(ops["lm_head_fp8"])


def exercise_record_fp8_compiled() -> str:
    """The record's ops with their inner torch.compile'd functions compiled by Inductor for the CPU."""
    from torch._dynamo.utils import counters

    ops = record_fp8_ops()
    before = counters["stats"]["unique_graphs"]
    result = _record_fp8_against_fp32(ops["lm_head_fp8"])
    graphs = counters["stats"]["unique_graphs"] - before
    assert graphs >= 2, f"{graphs} graphs compiled (expected the forward's and the backward's impl)"
    return f"{graphs} graphs compiled; {result}"


def exercise_torch_ref_fp8() -> str:
    """torch_ref's FP8 matmul on its `_scaled_mm` branch, with CPU tensors, against its emulation."""
    from torch_ref import fp8

    results = []
    for use_scaled_mm in (True, False):
        x, w = _fp8_inputs()
        scales = (fp8.X_SCALE, fp8.W_SCALE, fp8.GRAD_SCALE)
        out = fp8._FP8Matmul.apply(x, w, scales, use_scaled_mm)
        (out.float().sum() / 65536).backward()
        results.append((out, x.grad, w.grad))
    errors = {k: _relative_error(a, b) for k, a, b in zip(("out", "grad_x", "grad_w"), *results, strict=True)}
    assert all(error < 1e-2 for error in errors.values()), f"relative differences {errors}"
    return "_scaled_mm against the emulation: " + ", ".join(f"{k} {v:.1e}" for k, v in errors.items())


def _attention_case(window_blocks: int) -> tuple[Any, Any, Any, Any]:
    """q, k, v (1, 2, 1024, 64), torch_ref's BlockMask for 3 documents and a window, and the
    (T, T) allowed mask of the same lists."""
    import torch

    from torch_ref import masks

    generator = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, 50000, (1024,), generator=generator)
    tokens[[100, 400, 700]] = 50256
    docs = masks.document_ids(tokens, 50256, 128)
    lists = masks.truncate_to_window(masks.block_lists(docs, 128), window_blocks)
    q, k, v = (torch.randn(1, 2, 1024, 64, generator=generator) for _ in range(3))
    return (q, k, v), masks.build_block_mask(lists, docs, 128), masks.allowed_mask_from_block_lists(lists, docs, 128), docs


def exercise_flex_eager() -> str:
    """torch_ref's BlockMask.from_kv_blocks on the CPU and eager flex_attention(block_mask=, scale=)
    against SDPA with the same allowed set (a window over all 8 blocks: eager ignores the lists)."""
    import torch.nn.functional as F
    from torch.nn.attention.flex_attention import flex_attention

    (q, k, v), block_mask, allowed, _ = _attention_case(8)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "flex_attention called without torch.compile()"
        got = flex_attention(q, k, v, block_mask=block_mask, scale=0.12)
    want = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, scale=0.12)
    diff = float((got - want).abs().max())
    assert diff < 1e-4, f"max difference {diff}"
    return f"BlockMask {tuple(block_mask.shape)}; max |flex - SDPA| {diff:.1e}"


def exercise_flex_compiled() -> str:
    """torch_ref's compiled flex_attention (Inductor's CPU kernel) with a 3-block window, against SDPA."""
    import torch.nn.functional as F

    from torch_ref import attention

    (q, k, v), block_mask, allowed, _ = _attention_case(3)
    got = attention.attend(q, k, v, block_mask)
    want = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, scale=attention.ATTN_SCALE)
    diff = float((got - want).abs().max())
    assert diff < 1e-4, f"max difference {diff}"
    return f"max |flex - SDPA| {diff:.1e}"


def exercise_newton_schulz_compiled() -> str:
    """torch_ref's torch.compile'd Newton-Schulz (the CUDA path's) on the CPU: as close to the fp32
    iteration as eager bf16 is (the two bf16 paths round at different points, ~3% apart)."""
    import torch

    from torch_ref import muon

    G = torch.randn(128, 256, generator=torch.Generator().manual_seed(0))
    compiled = muon._compiled_newton_schulz()(G, 5, torch.bfloat16, "poly")
    fp32 = muon._newton_schulz(G, 5, torch.float32, "poly")
    errors = {"compiled": _relative_error(compiled, fp32),
              "eager": _relative_error(muon._newton_schulz(G, 5, torch.bfloat16, "poly"), fp32)}
    assert compiled.dtype == torch.bfloat16, f"compiled returned {compiled.dtype}"
    assert errors["compiled"] < min(1.5 * errors["eager"], 0.05), f"relative errors against fp32 {errors}"
    return "bf16, relative error against fp32: " + ", ".join(f"{k} {v:.3f}" for k, v in errors.items())


def exercise_inductor_settings() -> str:
    """torch_ref's apply_inductor_settings (the record's config flag) set, then restored."""
    import torch._inductor.config as inductor_config

    from torch_ref import compilation

    with inductor_config.patch(coordinate_descent_tuning=False):
        applied = compilation.apply_inductor_settings()
        read = {name: getattr(inductor_config, name) for name in applied}
    assert read == applied, f"read back {read}"
    return f"set {applied}"


def exercise_all_gather() -> str:
    """torch_ref's Muon all-gather (async) and the record's all_gather_into_tensor on a one-process gloo group."""
    import torch
    import torch.distributed as dist

    from torch_ref import muon

    if dist.is_initialized():
        raise Skipped("a process group is already initialised in this process")
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        local = torch.arange(8.0)
        gathered, record = torch.empty(8), torch.empty(8)
        muon._all_gather_flat(gathered, local).wait()
        with warnings.catch_warnings():  # newer torch: "deprecated, use all_gather_single"
            warnings.simplefilter("ignore", FutureWarning)
            dist.all_gather_into_tensor(record, local, async_op=True).wait()  # the record's call (its line 215)
    finally:
        dist.destroy_process_group()
    assert torch.equal(gathered, local) and torch.equal(record, local), f"gathered {gathered}, {record}"
    which = "all_gather_single" if getattr(dist, "all_gather_single", None) else "all_gather_into_tensor"
    return f"torch_ref gathers with {which}; both equal the input"


@dataclass(frozen=True)
class Exercise:
    """A run of the code on the CPU; `slow` ones compile with Inductor (seconds to tens of seconds)."""

    name: str
    run: Callable[[], str]
    sites: tuple[Site, ...]
    slow: bool = False


EXERCISES: tuple[Exercise, ...] = (
    Exercise("record FP8 ops: custom_op + register_fake + register_autograd under FakeTensorMode",
             exercise_record_fp8_fake, (_record(24, "custom_op"), _record(43, "register_fake"), _record(100, "register_autograd"))),
    Exercise("record FP8 ops: torch._scaled_mm on the CPU (torch.compile force-eager)", exercise_record_fp8_eager,
             (_record(31, "_scaled_mm"), _record(60, "_scaled_mm"), _record(69, "_scaled_mm"))),
    Exercise("record FP8 ops: inner torch.compile by Inductor for the CPU", exercise_record_fp8_compiled,
             (_record(26, "@torch.compile"), _record(53, "@torch.compile")), slow=True),
    Exercise("torch_ref FP8 matmul: the _scaled_mm branch on CPU tensors", exercise_torch_ref_fp8,
             (_ref("fp8.py", "torch._scaled_mm("),)),
    Exercise("torch_ref BlockMask.from_kv_blocks + eager flex_attention on the CPU", exercise_flex_eager,
             (_ref("masks.py", "BlockMask.from_kv_blocks("),)),
    Exercise("torch_ref compiled flex_attention on the CPU (Inductor)", exercise_flex_compiled,
             (_ref("attention.py", "torch.compile(flex_attention"),), slow=True),
    Exercise("torch_ref compiled Newton-Schulz on the CPU (Inductor)", exercise_newton_schulz_compiled,
             (_ref("muon.py", "torch.compile(_newton_schulz)"),), slow=True),
    Exercise("torch_ref Inductor setting (coordinate_descent_tuning)", exercise_inductor_settings,
             (_ref("compilation.py", "setattr(inductor_config"),)),
    Exercise("torch_ref Muon all-gather on a one-process gloo group", exercise_all_gather,
             (_ref("muon.py", "gather(output, local, async_op=True)"), _record(215, "all_gather_into_tensor"))),
)


def run_exercise(exercise: Exercise) -> dict[str, Any]:
    """One exercise's row: ok with what it showed and its seconds, None when skipped, else the error."""
    start = time.perf_counter()
    row = {"name": f"exercised: {exercise.name}", "where": where(exercise.sites)}
    try:
        shown = exercise.run()
    except Skipped as skipped:
        return {**row, "ok": None, "problem": "", "checked": f"skipped: {skipped}"}
    except Exception as error:  # noqa: BLE001 - any failure of the exercised code is the row's result
        return {**row, "ok": False, "problem": f"{type(error).__name__}: {one_line(error)}",
                "checked": f"exercised ({time.perf_counter() - start:.1f} s)"}
    return {**row, "ok": True, "problem": "", "checked": f"exercised ({time.perf_counter() - start:.1f} s): {shown}"}


def run_exercises(slow: bool = True, exercises: Iterable[Exercise] = EXERCISES) -> list[dict[str, Any]]:
    """A row per exercise (the slow ones only with `slow`)."""
    return [run_exercise(exercise) for exercise in exercises if slow or not exercise.slow]


# ---------------------------------------------------------------------------------------------
# The report


def environment() -> dict[str, Any]:
    """The versions the check ran under."""
    import platform

    import torch

    try:
        import triton

        triton_version: str | None = triton.__version__
    except ImportError:
        triton_version = None
    return {"python": platform.python_version(), "torch": torch.__version__, "torch_cuda": torch.version.cuda,
            "triton": triton_version}


def report(exercise: bool = True, slow: bool = True) -> dict[str, Any]:
    """Environment, every API row and (with `exercise`) the exercises' rows, and the failures' count."""
    rows = check_uses()
    if exercise:
        rows += run_exercises(slow=slow)
    return {**environment(), "rows": rows, "failed": sum(row["ok"] is False for row in rows),
            "skipped": sum(row["ok"] is None for row in rows)}


def table(rows: list[dict[str, Any]]) -> str:
    """One line per row: ok/FAIL/skip, name, where, then the problem (or how it was checked)."""
    status = {True: "ok", False: "FAIL", None: "skip"}
    return "\n".join(f"{status[row['ok']]:<4}  {row['name']}  [{row['where']}]  {row['problem'] or row['checked']}"
                     for row in rows)
