"""jaxgpt_tools.parity.record_code's harness parts that need no record log (record_logs, record_changes,
record_standins): where the logs are looked for, how a
script is cut out of a log, the stand-ins for torch.distributed and FlexAttention. (The records'
own code against both frameworks: parity_tests/test_record_code.py.)"""

from __future__ import annotations

import pytest

from jaxgpt_tools.parity import record_changes, record_standins
from jaxgpt_tools.parity import record_code as rc
from jaxgpt_tools.parity.record_standins import OneRank


def test_logs_are_looked_for_beside_the_checkout_unless_the_variable_says_otherwise(monkeypatch, tmp_path):
    monkeypatch.delenv(rc.LOGS_ENV, raising=False)
    assert rc.logs_root() == rc.REPO_ROOT.parent / "shared" / "upstream"
    monkeypatch.setenv(rc.LOGS_ENV, str(tmp_path))
    assert rc.logs_root() == tmp_path
    assert rc.missing_logs() == list(rc.RECORD_LOGS)
    with pytest.raises(FileNotFoundError, match=r"scripts/fetch_record\.py --lineage-logs"):
        rc.log_path("softcap")
    with pytest.raises(ValueError, match="unknown record 'sub4min'"):
        rc.log_path("sub4min")


def _write_log(root, name: str, text: str) -> None:
    log = rc.RECORD_LOGS[name]
    (root / log.folder).mkdir(parents=True)
    (root / log.folder / log.file).write_text(text)


def test_the_script_is_the_log_above_its_first_rule_even_when_the_log_opens_with_one(tmp_path):
    rule = "=" * 100
    _write_log(tmp_path, "untie-embed", f"{rule}\nimport os\nprint(1)\n{rule}\nstep:0/10 val_loss:10.8\n")
    _write_log(tmp_path, "record", f"import os\n\n{rule}\nRunning PyTorch\n")
    assert rc.record_script("untie-embed", tmp_path) == "import os\nprint(1)\n"  # #8 and #9 print a rule first
    assert rc.record_script("record", tmp_path) == "import os\n"


def test_download_writes_the_layout_the_harness_reads(tmp_path):
    source = tmp_path / "mirror"
    for name in rc.RECORD_LOGS:
        _write_log(source, name, f"script of {name}\n")
    written = rc.download_logs(tmp_path / "logs", url_base=source.as_uri())
    assert len(written) == 5 and rc.missing_logs(tmp_path / "logs") == []


def test_snippets_are_taken_once_or_refused():
    main = "x = 1\n# int main\n@dataclass\nclass Hyperparameters:\n    a = 1\nargs = Hyperparameters()\n"
    optimizers = "# init the optimizer(s)\nopt = 1\nschedulers = []\n"
    step = "    # step the optimizers and schedulers\n    opt.step()\n    # null the gradients\n"
    found = record_changes.snippets("untie-embed", main + optimizers + step)
    assert found["optimizers"] == optimizers and found["step"] == "# step the optimizers and schedulers\nopt.step()\n"
    with pytest.raises(ValueError, match="'optimizers' found 2 times"):
        record_changes.snippets("untie-embed", main + optimizers + optimizers + step)
    with pytest.raises(ValueError, match="one `# int main` line"):
        record_changes.snippets("untie-embed", optimizers)


def test_one_rank_collectives_leave_or_copy_the_tensor():
    torch = pytest.importorskip("torch")
    tensor = torch.arange(6.0)
    assert OneRank.all_reduce(tensor, op=OneRank.ReduceOp.AVG) is None and torch.equal(tensor, torch.arange(6.0))
    slots = [torch.zeros(6)]
    OneRank.all_gather(slots, tensor, async_op=True).wait()
    assert torch.equal(slots[0], tensor)
    out = torch.zeros(1, 6)
    OneRank.all_gather_into_tensor(out, tensor)
    assert torch.equal(out[0], tensor)
    with pytest.raises(ValueError, match="one slot"):
        OneRank.all_gather([torch.zeros(6)] * 2, tensor)


def test_block_lists_give_flex_attention_s_allowed_pairs():
    """Partial blocks pass the mask_mod, full blocks all pass, negative counts list nothing, a
    block in both lists is refused; the dense softmax attends exactly the allowed pairs."""
    torch = pytest.importorskip("torch")
    causal = lambda b, h, q, k: q >= k  # noqa: E731
    # 3 blocks of 2 tokens; query block 2 lists block 2 (partial) and block 0 (full), not block 1.
    partial = record_standins.KvBlocks.from_kv_blocks(torch.tensor([[[1, 1, 1]]]), torch.tensor([[[[0, 1, 2], [1, 0, 2], [2, 0, 1]]]]),
                                         torch.tensor([[[0, -1, 1]]]), torch.tensor([[[[1, 2, 0], [0, 1, 2], [0, 1, 2]]]]),
                                         BLOCK_SIZE=2, mask_mod=causal)
    allowed = partial.allowed(6)
    expected = torch.tensor([[1, 0, 0, 0, 0, 0], [1, 1, 0, 0, 0, 0], [0, 0, 1, 0, 0, 0], [0, 0, 1, 1, 0, 0],
                             [1, 1, 0, 0, 1, 0], [1, 1, 0, 0, 1, 1]], dtype=torch.bool)
    assert torch.equal(allowed, expected)
    both = record_standins.KvBlocks.from_kv_blocks(torch.tensor([[[1, 1, 1]]]), torch.tensor([[[[0, 1, 2], [1, 0, 2], [2, 0, 1]]]]),
                                      torch.tensor([[[1, 0, 0]]]), torch.tensor([[[[0, 1, 2]] * 3]]), BLOCK_SIZE=2)
    with pytest.raises(ValueError, match="both partial and full"):
        both.allowed(6)
    q, k, v = (torch.randn(1, 2, 6, 4, generator=torch.Generator().manual_seed(i)) for i in range(3))
    out = record_standins.dense_flex_attention(q, k, v, partial, scale=0.5)
    scores = (q @ k.transpose(-2, -1)) * 0.5
    reference = torch.softmax(scores.masked_fill(~expected, float("-inf")), -1) @ v
    torch.testing.assert_close(out, reference, rtol=0, atol=0)
