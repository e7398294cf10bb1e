"""A CPU-only process made to look like one H100 to torch and Triton, so that TorchInductor emits
its H100 output code (and compiles its Triton kernels to sm_90a cubins) with no GPU and no driver:
compiled without a GPU, no autotuning (docs/spec/GPU_COMPILE_NOTES.md, "TorchInductor for an
H100"). Private torch and Triton APIs throughout, checked against torch 2.14.1 and triton 3.8;
`install` raises ValueError on a torch without CUDA support.

What a real H100 would decide by running kernels is left out rather than guessed: no
max_autotune (Inductor's Triton GEMM templates and their epilogue fusion are chosen by timing
them on the GPU; without it every GEMM is an extern cuBLAS call, Inductor's default), no
coordinate-descent tuning, and a pointwise or reduction kernel's block size (picked among its
configs at its first launch) is never picked: the output code lists the configs.

The pieces, each needed for a measured reason:
  - a shim loaded as `libcuda.so.1` before torch starts CUDA, defining cudaGetDeviceCount (1
    device), cudaGetDevice/cudaSetDevice and cudaDeviceGetStreamPriorityRange for the runtime and
    cuDevicePrimaryCtxGetState (no context) for the driver: autograd (torch >= 2.11) asks
    whether the device of each tensor it differentiates has a primary context, which needs a
    device count of at least 1; with no context it never sets the device;
  - torch.cuda's device queries (and Dynamo's CudaInterface copies of them) answering with the
    H100 SXM's published properties (sm 9.0, 132 SMs, 80 GB, warp 32);
  - a Triton driver that reports GPUTarget("cuda", 90, 32) and never loads a binary; Inductor's
    kernel launchers are never built (nothing launches);
  - Inductor's pattern initialisation and uniform-value constant folding, which make real tensors
    on the input device, make them on the CPU (pattern inputs: shapes only; folded constants:
    values only, re-emitted as `full` on the GPU by the pass itself).
"""

from __future__ import annotations

import ctypes
import hashlib
import subprocess
import tempfile
from collections import namedtuple
from pathlib import Path
from typing import Any

# H100 SXM5 80 GB (its published facts); what Inductor reads from torch.cuda.get_device_properties.
H100 = {"name": "NVIDIA H100 80GB HBM3", "major": 9, "minor": 0, "total_memory": 85_520_809_984,
        "multi_processor_count": 132, "warp_size": 32, "max_threads_per_multi_processor": 2048,
        "max_threads_per_block": 1024, "regs_per_multiprocessor": 65536, "shared_memory_per_block_optin": 232448,
        "shared_memory_per_multiprocessor": 233472, "L2_cache_size": 52_428_800, "clock_rate": 1_980_000,
        "gcnArchName": "", "uuid": "compile-only", "is_integrated": False}
# What Triton's driver utilities report of a device (triton/backends/nvidia/driver.c's names).
TRITON_PROPERTIES = {"max_shared_mem": 232448, "multiprocessor_count": 132, "sm_clock_rate": 1_980_000,
                     "mem_clock_rate": 2_619_000, "mem_bus_width": 5120, "max_num_regs": 65536, "warpSize": 32}

SHIM_SOURCE = r"""
/* jaxgpt_tools/fusion/fake_cuda.py: one CUDA device for torch's runtime calls, no context. */
int cudaGetDeviceCount(int *count) { *count = 1; return 0; }
int cudaGetDevice(int *device) { *device = 0; return 0; }
int cudaSetDevice(int device) { (void)device; return 0; }
int cudaGetLastError(void) { return 0; }
int cudaDeviceGetStreamPriorityRange(int *least, int *greatest) { *least = 0; *greatest = -5; return 0; }
int cuDevicePrimaryCtxGetState(int device, unsigned int *flags, int *active) { (void)device; *flags = 0; *active = 0; return 0; }
"""

_installed: dict[str, Any] = {}


def build_shim(folder: Path | None = None) -> Path:
    """Compile SHIM_SOURCE with the C compiler into folder/libcuda.so.1 (named by its source's
    hash, so a rebuilt source never reuses a stale library); returns its path."""
    folder = Path(folder or Path(tempfile.gettempdir()) / "jaxgpt-fake-cuda")
    digest = hashlib.sha256(SHIM_SOURCE.encode()).hexdigest()[:12]
    out = folder / digest / "libcuda.so.1"
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        source = out.parent / "shim.c"
        source.write_text(SHIM_SOURCE)
        done = subprocess.run(["cc", "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", str(out), str(source)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise ValueError(f"could not build the libcuda.so.1 shim: {done.stderr[-500:]}")
    return out


def torch_cuda_version() -> str | None:
    """The CUDA version the installed torch was built for (torch/version.py's `cuda`), read
    without importing torch; None for a CPU build or no torch."""
    import importlib.util
    import re

    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return None
    text = (Path(next(iter(spec.submodule_search_locations))) / "version.py").read_text()
    found = re.search(r"^cuda(?:: [^=]+)? = '([^']+)'", text, re.MULTILINE)
    return found.group(1) if found else None


def _patch_torch_cuda(torch) -> None:
    """torch.cuda's device queries (and Dynamo's CudaInterface, which copied them at import)
    answer for one H100; nothing initialises the CUDA runtime."""
    import torch.cuda.random as cuda_random
    from torch._dynamo.device_interface import CudaInterface

    props = namedtuple("FakeDeviceProperties", list(H100))(**H100)
    cuda = torch.cuda
    queries = {"is_available": lambda: True, "device_count": lambda: 1, "current_device": lambda: 0,
               "get_device_properties": lambda device=None: props, "get_device_capability": lambda device=None: (9, 0),
               "get_device_name": lambda device=None: H100["name"], "_lazy_init": lambda: None,
               "is_bf16_supported": lambda *a, **k: True, "set_device": lambda device: None,
               "synchronize": lambda *a, **k: None, "_exchange_device": lambda index: 0,
               "_maybe_exchange_device": lambda index: 0, "is_current_stream_capturing": lambda: False,
               "get_rng_state": lambda *a, **k: torch.zeros(16, dtype=torch.uint8), "set_rng_state": lambda *a, **k: None}
    for name, fn in queries.items():
        setattr(cuda, name, fn)
    cuda_random._lazy_init = lambda: None
    for name in ("get_device_properties", "current_device", "set_device", "device_count", "synchronize",
                 "is_bf16_supported"):
        setattr(CudaInterface, name, staticmethod(queries[name]))  # type: ignore[arg-type]  # torch's own stand-ins
    CudaInterface.exchange_device = staticmethod(queries["_exchange_device"])  # type: ignore[arg-type]  # torch's own
    CudaInterface.maybe_exchange_device = staticmethod(queries["_maybe_exchange_device"])  # type: ignore[arg-type]  # as above
    CudaInterface.get_raw_stream = staticmethod(lambda *a: 0)


def _patch_triton(torch) -> None:
    """Triton's active driver: the CUDA one, targeting sm 90, that never loads a binary; Inductor
    builds no kernel launcher (the cubins are compiled, never launched)."""
    import torch._inductor.runtime.triton_heuristics as heuristics
    import torch.utils._triton as torch_triton
    from triton.backends.compiler import GPUTarget
    from triton.backends.nvidia.driver import CudaDriver
    from triton.runtime.driver import driver

    class Utils:
        def get_device_properties(self, device):
            return dict(TRITON_PROPERTIES)

        def load_binary(self, *args, **kwargs):
            raise RuntimeError("compiled without a GPU: a kernel binary is never loaded")

    class CompileOnlyDriver(CudaDriver):
        def __init__(self):  # CudaDriver's own builds a C module against libcuda
            self.utils, self.launcher_cls = Utils(), None
            self.get_device_capability = lambda device=None: (9, 0)
            self.get_current_stream = lambda device=None: 0
            self.get_current_device = lambda: 0
            self.set_current_device = lambda device: None

        def get_current_target(self):
            return GPUTarget("cuda", 90, 32)

        def get_benchmarker(self):
            raise RuntimeError("compiled without a GPU: nothing is benchmarked")

    driver.set_active(CompileOnlyDriver())
    heuristics.CachingAutotuner._make_launchers = lambda self: None  # type: ignore[method-assign]  # nothing launches here
    torch_triton.has_triton.cache_clear()


def _patch_inductor(torch) -> None:
    """Inductor's passes that make real tensors on the input device make them on the CPU."""
    import torch._inductor.fx_passes.joint_graph as joint_graph
    from torch.utils._python_dispatch import TorchDispatchMode

    class CudaOnCpu(TorchDispatchMode):
        """Factory calls asked for a CUDA tensor get a CPU one (constant folding's values)."""

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            if kwargs.get("device") is not None and torch.device(kwargs["device"]).type == "cuda":
                kwargs["device"] = torch.device("cpu")
            return func(*args, **kwargs)

    lazy_init, deduce = joint_graph.lazy_init, joint_graph.UniformValueConstantFolder._deduce_value

    def patterns_init(input_device=None, *args, **kwargs):
        real = torch.tensor

        def tensor(data, *targs, device=None, **tkwargs):  # a pattern's scalar input: its shape and dtype only
            made = real(data, *targs, **tkwargs)
            return made if device is None else torch.empty(made.shape, dtype=made.dtype, device=device)

        torch.tensor = tensor
        try:
            return lazy_init(input_device, *args, **kwargs)
        finally:
            torch.tensor = real

    def deduce_on_cpu(self, node):
        with CudaOnCpu():
            return deduce(self, node)

    joint_graph.lazy_init = patterns_init
    joint_graph.UniformValueConstantFolder._deduce_value = deduce_on_cpu  # type: ignore[method-assign]  # on the CPU


def install(shim_dir: Path | None = None) -> dict[str, Any]:
    """Make this process a compile-only H100 for torch and Triton; call before anything touches
    CUDA (the shim must be loaded before torch counts devices, which it does once, at the first
    device query, not at import). Idempotent; returns what was installed. ValueError on a torch
    built without CUDA (or none), before anything is loaded or patched."""
    if _installed:
        return _installed
    cuda = torch_cuda_version()
    if cuda is None:
        raise ValueError("this torch has no CUDA support: Inductor's H100 code needs a CUDA build (make torch-cuda)")
    shim = build_shim(shim_dir)
    # Before torch is imported: torch puts its CUDA runtime in the global symbol scope, and the
    # first library there that defines cudaGetDeviceCount answers torch's calls.
    ctypes.CDLL(str(shim), mode=ctypes.RTLD_GLOBAL)
    import torch
    _patch_torch_cuda(torch)
    _patch_triton(torch)
    _patch_inductor(torch)
    _installed.update({"shim": str(shim), "torch": torch.__version__, "cuda": cuda, "device": H100["name"]})
    return _installed
