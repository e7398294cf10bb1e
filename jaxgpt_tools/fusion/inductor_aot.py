"""Inductor's H100 output code for the fusion study's programs, compiled without a GPU, no
autotuning (the Inductor counterpart of fusion_xla's compile-only H100; run in the CUDA-torch
venv, `make torch-cuda`, after fusion_fake_cuda.install).

Dynamo traces the program on the CPU (the module's parameters and buffers become graph
inputs); Inductor then compiles that graph for "cuda" with FakeTensor inputs of the same shapes,
dtypes and strides, through `compile_fx`, the entry torch.compile's "inductor" backend uses: its
AOTAutograd partitions forward and backward (the backward lowered at once, not at its first
call), and its debug trace writes each graph's output_code.py, read by fusion_inductor's launch
table. Inductor's default GPU configuration, except what needs a GPU (module docstring of
fusion_fake_cuda): `max_autotune` stays off, so every GEMM is an extern cuBLAS `mm`.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from jaxgpt_tools.common.timing import timed
from jaxgpt_tools.fusion.inductor import build_module, inductor_record
from jaxgpt_tools.fusion.xla import COMPILE_ONLY, LAYOUTS, MODES, PARTS, Compiled, Shape, program_name, run_programs

# Non-default Inductor settings of every compile-only program, recorded with it.
COMPILE_ONLY_CONFIG = {"max_autotune": False, "coordinate_descent_tuning": False, "compile_threads": 1,
                       "fx_graph_cache": False, "fx_graph_remote_cache": False}


def capture_graph(fn, inputs: tuple, mode: str):
    """(Dynamo's FX graph of fn, its example inputs): traced on the CPU tensors given, with
    torch.accelerator reported absent so that Dynamo tracks no CUDA stream; "fwd" under no_grad."""
    import torch

    captured: dict[str, Any] = {}

    def keep(gm, example_inputs):
        captured.update(gm=gm, inputs=list(example_inputs))
        return gm.forward

    accelerator = torch.accelerator.is_available
    torch.accelerator.is_available = lambda: False
    try:
        torch._dynamo.reset()
        with torch.no_grad() if mode == "fwd" else torch.enable_grad():
            torch.compile(fn, backend=keep, fullgraph=True)(*inputs)
    finally:
        torch.accelerator.is_available = accelerator
    return captured["gm"], captured["inputs"]


def fake_cuda_inputs(inputs: list) -> list:
    """FakeTensors on "cuda" with each input's shape, stride, dtype and requires_grad."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        return [torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device="cuda").requires_grad_(x.requires_grad)
                for x in inputs]


def compile_program(part: str, mode: str, layout: str, shape: Shape, *, out_dir: Path,
                    options: dict[str, Any] | None = None, variant: str = "default", flat: bool = False) -> Compiled:
    """Inductor's H100 code of one program (options: an ablation's Inductor config, named
    `variant`), its trace in out_dir/<program>/; returns its record (nothing runs)."""
    import torch
    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config
    from torch._inductor.compile_fx import compile_fx

    if part != "qkv":
        raise ValueError("compile-only Inductor programs: the QKV path only (the block's flex attention builds its "
                         "BlockMask by running kernels on the device)")
    name = program_name(part, mode, layout, shape, variant)
    fn, _, inputs = build_module(part, layout, shape, "cpu", flat)
    if mode == "fwdbwd":
        inputs = tuple(x.requires_grad_(True) for x in inputs)
    gm, example = capture_graph(fn, inputs, mode)
    fakes = fake_cuda_inputs(example)
    config = {"trace.enabled": True, "trace.debug_dir": str(out_dir / name), **COMPILE_ONLY_CONFIG, **(options or {})}
    with inductor_config.patch(config), functorch_config.patch(enable_autograd_cache=False,
                                                              force_non_lazy_backward_lowering=True), \
            torch.no_grad() if mode == "fwd" else torch.enable_grad():
        compile_s, _ = timed(lambda: compile_fx(gm, fakes))
    record = inductor_record(part, mode, layout, shape, variant=variant, options=options, trace_dir=out_dir / name,
                             device=COMPILE_ONLY, compile_s=compile_s, flops=None)
    record["compile_config"] = dict(COMPILE_ONLY_CONFIG)
    return Compiled(record, None, None)


def run(shapes: list[Shape], *, out_dir: Path, log=print, parts=PARTS, modes=MODES, options: dict[str, Any] | None = None,
        variant: str = "default", layouts=LAYOUTS, flat: bool = False) -> list[dict[str, Any]]:
    compile_one = functools.partial(compile_program, out_dir=out_dir, options=options, variant=variant, flat=flat)
    return run_programs(compile_one, shapes, timing=None, log=log, parts=parts, modes=modes, layouts=layouts)
