"""The committed fusion study's totals against a second path: the stored program texts
(artifacts/fusion/) re-read here by small parsers of their own, not by the code that made the
totals (jaxgpt_tools.common.hlo, fusion/inductor.py's launch table, fusion/byte_model.py), and the
figures' data (fusion.png, sweep.png, width_sweep.png) checked against results.json."""

from __future__ import annotations

import json
import math
import re

import pytest

from jaxgpt_tools.fusion.report import REPO_ROOT, load_results

ARTIFACTS = REPO_ROOT / "artifacts" / "fusion"
# Bytes per element, as the HLO text and torch name the dtypes (a table of this test's own).
HLO_BYTES = {"pred": 1, "s8": 1, "u8": 1, "bf16": 2, "f16": 2, "s16": 2, "u16": 2, "f32": 4, "s32": 4, "u32": 4,
             "f64": 8, "s64": 8, "u64": 8}
TORCH_BYTES = {"torch.float32": 4, "torch.bfloat16": 2, "torch.float16": 2, "torch.int64": 8, "torch.int32": 4,
               "torch.bool": 1, "torch.uint8": 1}
# HLO instructions that launch nothing (views, tuples, parameters and constants).
NO_KERNEL = {"parameter", "constant", "get-tuple-element", "tuple", "bitcast", "after-all", "partition-id", "replica-id",
             "opt-barrier", "add-dependency"}


@pytest.fixture(scope="module")
def committed():
    return load_results([ARTIFACTS / "results.json"])


def kept(committed, compiler: str):
    return [r for r in committed["records"] if r["compiler"] == compiler and r.get("files")]


# ---------------------------------------------------------------------------------------------
# XLA: the optimized HLO, read line by line

def type_bytes(text: str) -> int:
    """Bytes of every array in an HLO type ('(bf16[2,3]{1,0}, f32[4]{0})' -> 28)."""
    return sum(HLO_BYTES[dtype] * math.prod(int(d) for d in dims.split(",") if d)
               for dtype, dims in re.findall(r"\b([a-z]+\d*)\[([\d,]*)\]", text))


def entry_instructions(hlo: str) -> list[tuple[str, str, str, list[str]]]:
    """(name, type, opcode, operand names) of each instruction of the ENTRY computation."""
    lines = hlo.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("ENTRY "))
    out = []
    for line in lines[start + 1:]:
        if line.startswith("}"):
            break
        found = re.match(r"\s*(?:ROOT )?%([\w.\-]+) = (\(.*?\)|[a-z]+\d*\[[\d,]*\](?:\{[^}]*\})?) ([\w\-]+)\((.*?)\)", line)
        assert found, f"an ENTRY line this parser cannot read: {line[:120]}"
        name, shape, opcode, operands = found.groups()
        out.append((name, shape, opcode, re.findall(r"%([\w.\-]+)", operands)))
    return out


def xla_second_path(hlo: str) -> tuple[int, int, int]:
    """(kernels, GEMMs, bytes under the one byte model) of an optimized HLO module with no loops:
    every ENTRY instruction that launches work, reading its distinct operands and writing its
    result, each whole (a cuBLAS call's s8 workspace, the last array of its result, not counted);
    a GEMM is a dot, a GEMM custom call or a fusion whose computation has a dot."""
    assert " while(" not in hlo and " call(" not in hlo, "a module with loops or calls: this parser reads ENTRY only"
    entry = entry_instructions(hlo)
    types = {name: shape for name, shape, _, _ in entry}
    computations = dict(re.findall(r"^%?([\w.\-]+) [^\n]*\{\n(.*?)\n\}", hlo, re.MULTILINE | re.DOTALL))
    kernels = gemms = moved = 0
    for name, shape, opcode, operands in entry:
        if opcode in NO_KERNEL:
            continue
        kernels += 1
        line = next(line for line in hlo.splitlines() if re.match(rf"\s*(?:ROOT )?%{re.escape(name)} = ", line))
        called = re.findall(r"calls=%([\w.\-]+)", line)
        target = re.search(r'custom_call_target="([^"]+)"', line)
        workspace = re.search(r", (s8\[\d+\])(?:\{[^}]*\})?\)$", shape) if target and target.group(1).startswith("__cublas") else None
        moved += sum(type_bytes(types[o]) for o in dict.fromkeys(operands)) + type_bytes(shape) \
            - (type_bytes(workspace.group(1)) if workspace else 0)
        if opcode == "dot" or (target and re.search("gemm|matmul", target.group(1), re.I)) or any(
                re.search(r" dot\(", computations.get(c, "")) for c in called):
            gemms += 1
    return kernels, gemms, moved


def test_xla_totals_match_the_committed_hlo_read_again(committed):
    records = kept(committed, "xla")
    assert len(records) >= 8, "the committed study keeps the XLA QKV programs of both columns"
    for record in records:
        (name,) = record["files"]
        kernels, gemms, moved = xla_second_path((ARTIFACTS / name).read_text())
        assert (kernels, gemms) == (record["kernels"], record["gemm_kernels"]), name
        # Integer byte counts: exact.
        assert moved == record["kernel_traffic_bytes"], (name, moved, record["kernel_traffic_bytes"])


def test_xla_forward_backward_returns_what_a_training_step_keeps(committed):
    """The ROOT of a forward+backward QKV program returns q, k and v (bf16 (1, T, H, Dh)) and
    the gradients of h and ve (bf16 (1, T, D)) and of the weights (f32)."""
    for record in kept(committed, "xla"):
        if record["mode"] != "fwdbwd":
            continue
        hlo = (ARTIFACTS / record["files"][0]).read_text()
        root = re.search(r"^ENTRY [^\n]*-> (.*) \{$", hlo, re.MULTILINE).group(1)
        heads = re.findall(r"bf16\[1,(\d+),(\d+),(\d+)\]", root)
        dim, seq_len = record["shape"]["model_dim"], record["shape"]["seq_len"]
        assert len(heads) == 3 and all(int(t) == seq_len and int(h) * int(d) == dim for t, h, d in heads), root[:200]
        assert len(re.findall(rf"bf16\[1,{seq_len},{dim}\]", root)) == 2, root[:200]
        weights = sum(math.prod(map(int, dims.split(","))) for dims in re.findall(r"f32\[([\d,]+)\]", root))
        assert weights == 3 * dim * dim + 2  # the QKV weights and the two value-mix lambdas


# ---------------------------------------------------------------------------------------------
# Inductor: the output code's `call`, read line by line

def top_level_args(text: str) -> list[str]:
    """A call's arguments split at its top-level commas (up to its closing parenthesis)."""
    args, depth, current = [], 0, ""
    for char in text:
        if char == ")" and depth == 0:
            break
        depth += (char in "([") - (char in ")]")
        if char == "," and depth == 0:
            args.append(current.strip())
            current = ""
        else:
            current += char
    return args + ([current.strip()] if current.strip() else [])


def _numel(dims: str) -> int:
    return math.prod(int(d) for d in dims.split(",") if d.strip())


def inductor_second_path(code: str) -> tuple[int, int, int]:
    """(launches, GEMMs, bytes under the one byte model) of one output_code.py: each launch in
    `call` (a generated kernel, an extern_kernels call, a torch.ops fallback) moves every distinct
    buffer among its arguments whole (a reinterpret_tensor view as its view), once, and an
    in_out_ptr argument twice (read and written); buffers sized by their allocation, the graph's
    inputs by get_args' rand_strided."""
    sizes: dict[str, tuple[int, int]] = {}  # name -> (elements, bytes each)
    for name, dims, dtype in re.findall(r"(\w+) = rand_strided\(\(([\d, ]*)\), \([\d, ]*\), device='\w+(?::\d+)?', "
                                        r"dtype=(torch\.\w+)\)", code):
        sizes[name] = (_numel(dims), TORCH_BYTES[dtype])
    for name, dtype, dims in re.findall(r"^(\w+) = None  # device\([^)]*\) (torch\.\w+) \(([\d, ]*)\)", code, re.MULTILINE):
        sizes[name] = (_numel(dims), TORCH_BYTES[dtype])  # a frozen parameter (a constant of the graph)
    kernels = set(re.findall(r"^(\w+) = async_compile\.", code, re.MULTILINE))
    signatures = dict(re.findall(r"^def (\w+)\((.*?)\):", code, re.MULTILINE | re.DOTALL))
    signatures.update(re.findall(r'^(\w+) = async_compile\.cpp\w*\(.*?extern "C"[^(]*\w+\((.*?)\)', code,
                                 re.MULTILINE | re.DOTALL))
    body = code[code.index("def call("):]

    def sized(arg: str) -> int:
        view = re.match(r"reinterpret_tensor\((\w+), \(([\d, ]*)\)", arg)
        if view:
            return _numel(view.group(2)) * sizes.get(view.group(1), (0, 0))[1]
        elements, each = sizes.get(arg, (0, 0))
        return elements * each

    launches = gemms = moved = 0
    unsized: dict[str, int] = {}  # a fallback's result, sized by the assert_size_stride after it, in its first input's dtype
    for line in body.splitlines()[1:]:
        if line.strip() and not line.startswith(" "):
            break
        rename = re.match(r"\s*(buf\d+) = (buf\d+)\s*$", line)
        checked = re.match(r"\s*assert_size_stride\((buf\d+), \(([\d, ]*)\)", line)
        if rename and rename.group(2) in unsized:
            unsized[rename.group(1)] = unsized.pop(rename.group(2))
        if checked and checked.group(1) in unsized and checked.group(1) not in sizes:
            each = unsized.pop(checked.group(1))
            sizes[checked.group(1)] = (_numel(checked.group(2)), each)
            moved += _numel(checked.group(2)) * each
        alloc = re.match(r"\s*(buf\d+) = empty_strided_\w+\(\(([\d, ]*)\), \([\d, ]*\), (torch\.\w+)\)", line)
        view = re.match(r"\s*(buf\d+) = reinterpret_tensor\((\w+), \(([\d, ]*)\)", line)
        reuse = re.match(r"\s*(buf\d+) = (\w+); del \2\s+# reuse", line)
        if alloc:
            sizes[alloc.group(1)] = (_numel(alloc.group(2)), TORCH_BYTES[alloc.group(3)])
        elif view:
            sizes[view.group(1)] = (_numel(view.group(3)), sizes.get(view.group(2), (0, 0))[1])
        elif reuse:
            sizes[reuse.group(1)] = sizes.get(reuse.group(2), (0, 0))
        call = re.match(r"\s*(?:\w+ = )?(extern_kernels\.(\w+)|torch\.ops\.[\w.]+|(\w+)(?:\.run)?)\((.*)", line)
        if alloc or view or reuse or not call or (call.group(3) and call.group(3) not in kernels):
            continue
        launches += 1
        gemms += call.group(2) in ("mm", "bmm", "addmm") or bool(re.search(r"\.(mm|addmm|linear|_linear_pointwise)\b",
                                                                            call.group(1)))
        args = [re.sub(r"^out=", "", a) for a in top_level_args(call.group(4))]
        result = re.match(r"\s*(buf\d+) = torch\.ops\.", line)
        if result:
            first = next((a for a in args if sized(a)), "")
            base = re.sub(r"reinterpret_tensor\((\w+),.*", r"\1", first)
            unsized[result.group(1)] = sizes.get(base, (0, 4))[1]
        both = set()
        if call.group(3) in signatures:
            # A Triton parameter's annotation follows one colon; a C++ type holds "::".
            params = [re.findall(r"\w+", re.split(r"(?<!:):(?!:)", p)[0])[-1:]
                      for p in top_level_args(signatures[call.group(3)] + ")")]
            both = {a for a, p in zip(args, params, strict=False) if p and p[0].startswith("in_out_ptr")}
        moved += sum(sized(a) * (2 if a in both else 1) for a in dict.fromkeys(args))
    return launches, gemms, moved


def test_inductor_totals_match_the_committed_output_code_read_again(committed):
    records = kept(committed, "inductor")
    assert len(records) >= 8, "the committed study keeps the Inductor QKV programs of both columns"
    for record in records:
        totals = [inductor_second_path((ARTIFACTS / name).read_text()) for name in record["files"]]
        launches, gemms, moved = (sum(t[i] for t in totals) for i in range(3))
        assert (launches, gemms) == (record["kernels"], record["gemm_kernels"]), record["files"]
        # Integer byte counts: exact.
        assert moved == record["kernel_traffic_bytes"], (record["files"], moved, record["kernel_traffic_bytes"])


# ---------------------------------------------------------------------------------------------
# The figures: their files exist beside the data they plot, and the data they plot is whole

def test_figures_exist_and_their_data_is_complete(committed):
    from jaxgpt_tools.fusion.claims import answer_programs

    for name in ("fusion.png", "sweep.png"):
        path = ARTIFACTS / name
        assert path.is_file() and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
    # fusion.png: every target's four QKV programs, with kernels and bytes to plot.
    programs = answer_programs(committed["records"])
    assert len(programs) == 4 and all(p[k]["kernels"] > 0 and p[k]["kernel_traffic_bytes"] > 0 for p in programs.values() for k in p)
    # sweep.png: every threshold's series has a point at every T swept, forward.
    sweep = committed["sweep"]
    lens = {r["T"] for r in sweep}
    for threshold in {r["threshold_mb"] for r in sweep if r["layout"] == "separate"}:
        assert {r["T"] for r in sweep if r["threshold_mb"] == threshold and r["mode"] == "fwd"} == lens, threshold
    # width_sweep.png: both layouts at every (D, head dim, T) of the width sweep.
    width = committed.get("width_sweep") or []
    if width:
        assert (ARTIFACTS / "width_sweep.png").is_file()
        keys = {(r["D"], r["head_dim"], r["T"], r["mode"]) for r in width}
        assert all({r["layout"] for r in width if (r["D"], r["head_dim"], r["T"], r["mode"]) == key} == {"merged", "separate"}
                   for key in keys)
        assert len({r["D"] for r in width}) >= 4 and len({r["head_dim"] for r in width}) >= 2


def test_results_json_is_what_the_page_reads():
    """The committed results.json parses and names the command that writes the page from it."""
    results = json.loads((ARTIFACTS / "results.json").read_text())
    assert results["command"].startswith("python scripts/fusion_report.py --from-results")
