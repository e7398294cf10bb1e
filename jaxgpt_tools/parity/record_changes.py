"""The text changes the harness (jaxgpt_tools.parity.record_code) makes to a record's script, and
the statements it takes from the script's `# int main` part.

Each change is a `Patch` that must match exactly once (upstream_record.patch_script), applied in
the order `changes` lists; the names the harness binds in their stead are `BOUND_NAMES`. From the
`# int main` part (the training loop, never executed as a whole) only `SNIPPETS` are taken, each
also found exactly once.
"""

from __future__ import annotations

import re
import textwrap

from jaxgpt_tools.parity.record_logs import RECORD_LOGS
from jaxgpt_tools.upstream_record import Patch

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
_EAGER_NS = _drop("eager Newton-Schulz", "@torch.compile dropped from zeropower_via_newtonschulz5 (inductor on a "
                  "CPU builds C++ per shape): the reference runs eagerly what the record compiled. The fp32 math is the "
                  "same; in bf16 (the rows' bf16 NS modes) eager torch rounds after every operation where the compiled "
                  "kernels may fuse and round once: the device plan's record_readings step compares the two on a GPU",
                  r"^@torch\.compile\n(?=def zeropower_via_newtonschulz5)")
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
    Patch("compiled rotary table build", "#15's run built its tables inside torch.compile (docs/NUMERICS.md): the "
          "project's reading of that compiled build, inferred and never checked on a GPU (the device plan's "
          "record_readings step compares torch.compile's tables with eager's and this reading): fp32 positions and "
          "angles from its bf16 inv_freq, cos/sin rounded to the buffer's bf16",
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


# The bf16 column's changes (jaxgpt_tools.parity.record_code_bf16): the record's precision as
# written (its `.bfloat16()` casts, bf16 Newton-Schulz and update buffer); only what a CPU needs.
_MUON_BUFFER_CPU = Patch("Muon's update buffer on the CPU", "device string; the buffer keeps the record's bf16",
                         _MUON_BUFFER.pattern, 'device="cpu", dtype=torch.bfloat16)')
_FLEX_KERNEL = Patch("`BlockMask`, `flex_attention` bound to KvBlocks, kernel_flex_attention", "FlexAttention's "
                     "kernels need a GPU or a compile: the record's block lists and mask_mod are kept as it builds them "
                     "and the attention rounds bf16 as the kernel does (fp32 scores and sums, bf16 probabilities into "
                     "the PV product, the output rounded once)", _FLEX.pattern, _FLEX.replacement)
_EAGER_FP8 = [_drop(f"eager FP8 {which}", "@torch.compile dropped from the FP8 op's inner kernel (inductor on a CPU "
                    "builds C++): the same torch._scaled_mm call runs eagerly, on the CPU's fp32 accumulation",
                    rf"^[ \t]+@torch\.compile\n(?=[ \t]+def impl\({first}: Tensor)") for which, first in
              (("forward", "x"), ("backward", "grad"))]
# A second copy of #20's script in one process registers its custom ops under another namespace
# (torch.library refuses a name twice); the ops are the same functions.
_FP8_NAMESPACE = [Patch(f"FP8 op {where} in namespace nanogpt_bf16", "the fp32 copy of the script holds the "
                        "nanogpt ops in this process", pattern, replacement) for where, pattern, replacement in (
    ("mm registered", r'"nanogpt::mm"', '"nanogpt_bf16::mm"'),
    ("mm_backward registered", r'"nanogpt::mm_backward"', '"nanogpt_bf16::mm_backward"'),
    ("mm_backward called", r"torch\.ops\.nanogpt\.mm_backward\(", "torch.ops.nanogpt_bf16.mm_backward("),
    ("mm called", r"torch\.ops\.nanogpt\.mm\(", "torch.ops.nanogpt_bf16.mm("))]
# The records whose bf16 precision is explicit (`.bfloat16()` casts, no autocast): their bf16 runs
# on a CPU as written. #8/#9 run under torch.autocast, whose CPU op lists are not CUDA's.
BF16_RECORDS = ("unet-value-embeds", "softcap", "record")


def bf16_changes(name: str, eot_id: int = 50256) -> list[Patch]:
    """The changes of record `name`'s script for the bf16 column: `changes` without the fp32 ones
    (Newton-Schulz input, Muon's buffer dtype, #18's stream casts), its attention bound to the
    kernel's rounding, and for #20 its FP8 op run eagerly under its own namespace. ValueError for #8/#9 (autocast: BF16_RECORDS)."""
    if name not in BF16_RECORDS:
        raise ValueError(f"record {name!r} has no bf16 column (autocast on a CPU is not its run); choose one of {BF16_RECORDS}")
    fp32_only = {_FP32_NS.name, *(patch.name for patch in _SOFTCAP_ONLY)}
    in_bf16 = {_MUON_BUFFER.name: _MUON_BUFFER_CPU, _FLEX.name: _FLEX_KERNEL}
    kept = [in_bf16.get(patch.name, patch) for patch in changes(name, eot_id) if patch.name not in fp32_only]
    return [*kept, *_EAGER_FP8, *_FP8_NAMESPACE] if name == "record" else kept


# Names bound in the script's namespace before it runs (stand-ins for the dropped imports; #18's
# Muon reads a module-level `rank` that its main part defines).
BOUND_NAMES = {"dist": "OneRank", "BlockMask": "KvBlocks (#15-#20)",
               "flex_attention": "dense_flex_attention (#15-#20; the bf16 rows: kernel_flex_attention)",
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
