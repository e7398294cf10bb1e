"""What a CPU can run of the torch APIs that only a GPU run calls (`torch_api` lists and checks
them by signature), each in seconds, under the running interpreter's torch: the record's FP8
custom ops under FakeTensorMode, eagerly and compiled by Inductor for the CPU; torch_ref's
`_scaled_mm` branch against its emulation; its BlockMask with eager and compiled
`flex_attention` against SDPA; its compiled Newton-Schulz; its Inductor setting; its all-gather
on a one-process gloo group. Nothing here compiles for a GPU. Rows as `torch_api`'s; ok None: skipped."""

from __future__ import annotations

import functools
import time
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from jaxgpt_tools.common.command import one_line
from jaxgpt_tools.gpu import torch_api
from jaxgpt_tools.gpu.torch_api import RECORD, Site, record_at, ref_at, where


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
             exercise_record_fp8_fake, (record_at(24, "custom_op"), record_at(43, "register_fake"), record_at(100, "register_autograd"))),
    Exercise("record FP8 ops: torch._scaled_mm on the CPU (torch.compile force-eager)", exercise_record_fp8_eager,
             (record_at(31, "_scaled_mm"), record_at(60, "_scaled_mm"), record_at(69, "_scaled_mm"))),
    Exercise("record FP8 ops: inner torch.compile by Inductor for the CPU", exercise_record_fp8_compiled,
             (record_at(26, "@torch.compile"), record_at(53, "@torch.compile")), slow=True),
    Exercise("torch_ref FP8 matmul: the _scaled_mm branch on CPU tensors", exercise_torch_ref_fp8,
             (ref_at("fp8.py", "torch._scaled_mm("),)),
    Exercise("torch_ref BlockMask.from_kv_blocks + eager flex_attention on the CPU", exercise_flex_eager,
             (ref_at("masks.py", "BlockMask.from_kv_blocks("),)),
    Exercise("torch_ref compiled flex_attention on the CPU (Inductor)", exercise_flex_compiled,
             (ref_at("attention.py", "torch.compile(flex_attention"),), slow=True),
    Exercise("torch_ref compiled Newton-Schulz on the CPU (Inductor)", exercise_newton_schulz_compiled,
             (ref_at("muon.py", "torch.compile(_newton_schulz)"),), slow=True),
    Exercise("torch_ref Inductor setting (coordinate_descent_tuning)", exercise_inductor_settings,
             (ref_at("compilation.py", "setattr(inductor_config"),)),
    Exercise("torch_ref Muon all-gather on a one-process gloo group", exercise_all_gather,
             (ref_at("muon.py", "gather(output, local, async_op=True)"), record_at(215, "all_gather_into_tensor"))),
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
# The report: torch_api's rows and these


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
    rows = torch_api.check_uses()
    if exercise:
        rows += run_exercises(slow=slow)
    return {**environment(), "rows": rows, "failed": sum(row["ok"] is False for row in rows),
            "skipped": sum(row["ok"] is None for row in rows)}
