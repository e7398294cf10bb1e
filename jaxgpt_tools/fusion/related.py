"""docs/FUSION.md's related work: the published work this study stands beside, what each measured
and how the study differs. Cited by title and address; the facts are the cited works' own
(abstracts, documentation, source); the study's side of each comparison is made from its records
and checked like every other sentence (fusion_claims.Claim). tests/tools/fusion/test_related.py
checks the Inductor pass limits quoted here against the installed torch.
"""

from __future__ import annotations

from typing import Any

from jaxgpt_tools.fusion.claims import Claim
from jaxgpt_tools.fusion.records import find
from jaxgpt_tools.fusion.sweep import DOT_MERGER_FLAG, default_threshold

# torch._inductor.fx_passes.group_batch_fusion's limits, as the text quotes them (test_related reads torch's own).
BATCH_LINEAR_MIN_GROUP = 5
GROUP_LINEAR_MAX_SIZE = 4096
DOT_MERGER_DEFAULT_MB = 32  # xla/debug_options_flags.cc: set_xla_gpu_dot_merger_threshold_mb(32)

SOURCES = {
    "pytorch2": "Ansel et al., \"PyTorch 2: Faster Machine Learning Through Dynamic Python Bytecode Transformation and "
                "Graph Compilation\", ASPLOS 2024",
    "xla_fusion": "Snider and Liang, \"Operator Fusion in XLA: Analysis and Evaluation\", 2023 "
                  "(https://arxiv.org/abs/2301.13062)",
    "dot_merger": "XLA's `DotMerger` pass (xla/hlo/transforms/simplifiers/dot_merger.cc)",
    "group_batch": "torch/_inductor/fx_passes/group_batch_fusion.py",
    "vllm": "vLLM's `QKVParallelLinear` (https://docs.vllm.ai/api/vllm/model_executor/layers/linear.html)",
    "trtllm": "TensorRT-LLM's `gpt_attention` operator (docs/source/gpt_attention.md in NVIDIA/TensorRT-LLM)",
}


def _batch_linear_gemms(records: list[dict[str, Any]], variant: str) -> tuple[int, int] | None:
    """(GEMMs by default, GEMMs with the pass) of Inductor's separate forward on the H100 leg."""
    for r in records:
        if (r["compiler"], r["part"], r["mode"], r["layout"], r.get("variant")) == ("inductor", "qkv", "fwd", "separate", variant):
            base = find(records, **{k: r[k] for k in ("compiler", "device", "part", "mode", "layout", "shape")})
            if base is not None:
                return base["gemm_kernels"], r["gemm_kernels"]
    return None


def related_claim(records: list[dict[str, Any]], sweep: list[dict[str, Any]]) -> Claim:
    """One paragraph: each related work, what it measured, and how this study differs."""
    as_is, flat = _batch_linear_gemms(records, "batch_linear_lhs"), _batch_linear_gemms(records, "batch_linear_lhs_2d")
    guess = default_threshold(sweep) if sweep else []
    pass_words = (f" (here, the group size lowered to 3: the separate forward's {as_is[0]} GEMMs stay {as_is[1]} with "
                  f"the path's (1, T, D) input and become {flat[1]} with it flattened to (T, D))" if as_is and flat else "")
    sweep_words = (f"; this study sweeps it on the QKV path and finds the default switching where a {guess[0]} MiB "
                   f"threshold would, not {DOT_MERGER_DEFAULT_MB}" if len(guess) == 1 else "; this study sweeps it on the QKV path")
    text = (
        f"The PyTorch 2 paper ({SOURCES['pytorch2']}) evaluates TorchInductor end to end, 180+ real-world models on an "
        "NVIDIA A100, reporting geometric-mean speedups of 2.27x for inference and 1.41x for training; this "
        "study instead follows one subgraph through both compilers and reads what each fuses, kernel by kernel, with no "
        f"GPU time yet. {SOURCES['xla_fusion']} analyse XLA's fusion passes from its source and evaluate fusion strategies "
        "on a reinforcement-learning environment (CartPole), up to 10.56x over their baseline; this study looks at XLA's "
        "GPU pipeline of today for a transformer's projections (Triton GEMM fusions, the dot merger), beside Inductor on "
        f"the same math. {SOURCES['dot_merger']} merges dots that share an operand under a size threshold "
        f"(`{DOT_MERGER_FLAG}`, default {DOT_MERGER_DEFAULT_MB} MiB in xla/debug_options_flags.cc), a size rule"
        f"{sweep_words}. Inductor's group and batch fusions ({SOURCES['group_batch']}) are off by default: "
        f"`batch_linear_lhs` concatenates linears that share a 2-D input, in groups of at least {BATCH_LINEAR_MIN_GROUP} "
        f"by default{pass_words}; `group_linear` replaces mm and addmm nodes by fbgemm's grouped GEMM "
        f"(`torch.ops.fbgemm.gmm`) only when every size is even and at most {GROUP_LINEAR_MAX_SIZE}, which T 65,536 is "
        "not. Serving engines merge Q, K and V by hand, as the "
        f"record's model does: {SOURCES['vllm']} holds the three projections in one column-parallel weight, and "
        f"{SOURCES['trtllm']} takes them as one packed QKV input; the pages cited report no measurement of merged against "
        "separate that we found, which is the question here: whether a compiler would merge them itself, and what merging buys.")

    def check() -> bool:  # the study's side of each comparison, from its records
        pass_ok = not as_is or not flat or (as_is[0] == as_is[1] and flat[1] < flat[0])
        sweep_ok = not sweep or any(r["threshold_mb"] is None for r in sweep)
        flag_ok = any(DOT_MERGER_FLAG in (r.get("compiler_options") or {}) for r in records if r["compiler"] == "xla") \
            or not any(r.get("variant", "").startswith("dot_merger") for r in records)
        return pass_ok and sweep_ok and flag_ok and (len(guess) != 1 or guess[0] != DOT_MERGER_DEFAULT_MB)
    return Claim("related.work", text, check)
