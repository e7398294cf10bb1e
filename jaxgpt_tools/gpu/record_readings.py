"""The two readings of the records' compiled code that the parity suite's record's-code column
takes on trust, checked where a GPU can settle them (the device plan's `record_readings` step):

- #15's rotary tables. Its run built them inside torch.compile from a bf16 `inv_freq` (its
  model-wide `.bfloat16()`): positions `arange(T)` (int64), `outer(t, inv_freq)`, `cos`, `sin`.
  Eager torch rounds the positions and the angles to bf16 (a bf16 outer product); the project
  reads the compiled build as fp32 positions and angles with only the stored cos/sin rounded
  (torch_ref.rotary kind "full_bf16_freq", the harness's "compiled rotary table build"). Here the
  same statements run eagerly and under torch.compile, against both readings.
- #20's Newton-Schulz (`zeropower_via_newtonschulz5`, taken from the record's script), which the
  record compiled and the parity suite runs eagerly: compiled against eager in bf16 on the same
  inputs, with the record's own inductor setting (coordinate-descent tuning).

The device plan's step (`jaxgpt_tools.gpu.device_steps.record_readings`) runs both. On a CPU
(`compiled=False`, the plan's stand-in) nothing is compiled: the eager parts run at a small
size and the compiled ones are recorded as skipped (inductor's CPU backend emits C++, not the
Triton kernels the records ran).
"""

from __future__ import annotations

import re
from typing import Any

ROTARY_HEAD_DIM = 128  # #15's head dim (768 / 6)
ROTARY_SEQ_LEN = {"gpu": 64 * 1024, "cpu": 2048}  # #15's packed sequence; a short one on the CPU
NS_STEPS = 5
NS_SHAPES: dict[str, list[tuple[int, ...]]] = {"gpu": [(768, 768), (768, 3072), (3072, 768), (4, 768, 768)], "cpu": [(64, 64), (64, 256)]}
NS_FUNCTION = "zeropower_via_newtonschulz5"


def definition_source(script: str, name: str, keyword: str = "def") -> str:
    """The text of the script's top-level `def name(` (or `class name(`), without its decorators,
    up to the next top-level statement; ValueError unless it is defined exactly once."""
    pattern = rf"(?ms)^{keyword} {re.escape(name)}\b.*?(?=^[^\s#])"
    found = list(re.finditer(pattern, script + "\nEND"))
    if len(found) != 1:
        raise ValueError(f"expected one top-level `{keyword} {name}` in the record's script, found {len(found)}")
    return found[0].group(0)


def record_function(script: str, name: str):
    """The record's own top-level function `name`, executed from its script's text alone (torch
    and torch.Tensor bound), undecorated: eager."""
    import torch

    namespace: dict[str, Any] = {"torch": torch, "Tensor": torch.Tensor}
    exec(compile(definition_source(script, name), f"<the record's {name}>", "exec"), namespace)  # noqa: S102 - its own code
    return namespace[name]


def rotary_build(inv_freq, seq_len: int):
    """#15's table statements as its Rotary.forward runs them: int64 positions on inv_freq's
    device, their outer product with the (bf16) inv_freq, its cos and sin. Returns (cos, sin) in
    the product's dtype. (parity_tests/test_record_code.py checks these equal #15's own Rotary.)"""
    import torch

    t = torch.arange(seq_len, device=inv_freq.device)
    freqs = torch.outer(t, inv_freq)
    return freqs.cos(), freqs.sin()


def rotary_inv_freq(head_dim: int, device: str):
    """#15's inv_freq buffer, (1 / 10000) ** (arange(0, head_dim, 2) / head_dim) in fp32, then
    bf16 as its model's `.bfloat16()` leaves it."""
    import torch

    return ((1 / 10000) ** (torch.arange(0, head_dim, 2, device=device) / head_dim)).bfloat16()


def _table_differences(got, want) -> dict[str, Any]:
    got, want = got.float(), want.float()
    differ = got != want
    return {"entries_differing": int(differ.sum()), "fraction_differing": float(differ.float().mean()),
            "max_abs_diff": float((got - want).abs().max())}


def rotary_tables(device: str, compiled: bool) -> dict[str, Any]:
    """#15's tables built eagerly and (with `compiled`) under torch.compile, against both readings:
    torch_ref's "full_bf16_freq" (the project's, fp32 angles) and "full_bf16_freq_eager"."""
    import torch

    from torch_ref import rotary as torch_rotary

    kind = "cpu" if device == "cpu" else "gpu"
    seq_len, inv_freq = ROTARY_SEQ_LEN[kind], rotary_inv_freq(ROTARY_HEAD_DIM, device)
    builds = {"eager": rotary_build(inv_freq, seq_len)}
    if compiled:
        builds["compiled"] = torch.compile(rotary_build)(inv_freq, seq_len)
    readings = {name: torch_rotary.rotary_tables(ROTARY_HEAD_DIM, seq_len, device, kind=k)
                for name, k in (("project", "full_bf16_freq"), ("eager_reading", "full_bf16_freq_eager"))}
    result: dict[str, Any] = {"seq_len": seq_len, "head_dim": ROTARY_HEAD_DIM,
                              "dtypes": {name: str(cos.dtype) for name, (cos, _) in builds.items()}}
    for build, (cos, sin) in builds.items():
        for reading, (want_cos, want_sin) in readings.items():
            result[f"{build}_vs_{reading}"] = {"cos": _table_differences(cos, want_cos),
                                               "sin": _table_differences(sin, want_sin)}
    if compiled:
        result["compiled_vs_eager"] = {"cos": _table_differences(builds["compiled"][0], builds["eager"][0]),
                                       "sin": _table_differences(builds["compiled"][1], builds["eager"][1])}
        same = result["compiled_vs_project"]
        result["project_reading_holds"] = same["cos"]["entries_differing"] == same["sin"]["entries_differing"] == 0
    else:
        result["compiled"] = {"skipped": "needs a GPU: the record compiled for CUDA (Triton), not the CPU's C++"}
    return result


def newton_schulz(script: str, device: str, compiled: bool) -> dict[str, Any]:
    """The record's own Newton-Schulz eagerly and (with `compiled`) under torch.compile (the
    record's coordinate-descent tuning on), bf16 as written, on the same standard normal inputs:
    per shape the relative Frobenius and max |difference| of compiled against eager."""
    import torch

    function = record_function(script, NS_FUNCTION)
    kind = "cpu" if device == "cpu" else "gpu"
    result: dict[str, Any] = {"steps": NS_STEPS, "shapes": {}}
    if compiled:
        import torch._inductor.config as inductor_config

        inductor_config.coordinate_descent_tuning = True  # the record's own setting; this process only
        result["compiled_with"] = "torch.compile, coordinate_descent_tuning=True"
    compiled_function = torch.compile(function) if compiled else None
    generator = torch.Generator(device="cpu").manual_seed(0)
    for shape in NS_SHAPES[kind]:
        g = torch.randn(shape, generator=generator).to(device)
        eager = function(g, steps=NS_STEPS).float()
        row: dict[str, Any] = {"eager_dtype": str(function(g, steps=1).dtype)}
        if compiled_function is not None:
            other = compiled_function(g, steps=NS_STEPS).float()
            row.update(relative_frobenius=float((other - eager).norm() / eager.norm()),
                       max_abs_diff=float((other - eager).abs().max()),
                       fraction_differing=float((other != eager).float().mean()))
        result["shapes"]["x".join(map(str, shape))] = row
    if not compiled:
        result["compiled"] = {"skipped": "needs a GPU: the record compiled for CUDA (Triton), not the CPU's C++"}
    return result
