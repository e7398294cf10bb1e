"""jaxgpt_tools.fusion.related: the Inductor pass limits its paragraph quotes are the installed
torch's own, and the paragraph names every work the study is placed against."""

from __future__ import annotations

import inspect

from jaxgpt_tools.fusion import related
from jaxgpt_tools.fusion.report import REPO_ROOT, load_results


def test_the_quoted_pass_limits_are_torchs():
    from torch._inductor.fx_passes import group_batch_fusion as passes

    assert passes.MIN_FUSE_SET_SIZE == related.BATCH_LINEAR_MIN_GROUP
    assert passes.MAX_FUSE_TENSOR_SIZE_GROUP_LINEAR == related.GROUP_LINEAR_MAX_SIZE
    # batch_linear_lhs takes only 2-D inputs; group_linear calls fbgemm's grouped GEMM
    assert "len(input.meta[\"example_value\"].shape) == 2" in inspect.getsource(passes.is_linear_node_can_be_fused)
    assert "torch.ops.fbgemm.gmm" in inspect.getsource(passes.GroupLinearFusion)


def test_the_paragraph_names_each_work_and_holds_on_the_committed_results():
    study = load_results([REPO_ROOT / "artifacts" / "fusion" / "results.json"])
    claim = related.related_claim(study["records"], study["sweep"])
    assert claim.check()
    for words in ("ASPLOS 2024", "2.27x", "1.41x", "Snider and Liang", "10.56x", "dot_merger.cc", "group_batch_fusion.py",
                  "QKVParallelLinear", "gpt_attention", "become 1"):
        assert words in claim.text, words
