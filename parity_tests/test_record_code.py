"""Each record against its own code: the five records' scripts, taken from their logs and run on
the CPU in fp32 by jaxgpt_tools.parity.record_code, as the third column of the parity suite
(docs/PARITY.md's "Record's code" rows, jaxgpt_tools.parity.record_code_checks: the setting;
record_code_forward, record_code_training, record_code_capped: the rows; the optimizer rows in
test_record_code_optimizer.py).

The logs are read from $JAXGPT_UPSTREAM_LOGS (default ../shared/upstream beside the checkout,
which .ci/run sets); a record whose log is absent skips with the way to get it
(`python scripts/fetch_record.py --lineage-logs DIR`), or fails so under JAXGPT_REQUIRE_UPSTREAM_LOGS=1
(.ci/run sets it too).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from jaxgpt_tools.parity import record_changes
from jaxgpt_tools.parity import record_code as rc
from jaxgpt_tools.parity import record_code_checks as checks
from jaxgpt_tools.parity.checks import CHECKS, RECORD_CODE_CHECKED, RECORD_CODE_KINDS
from jaxgpt_tools.parity.record_code_forward import torch_ref_output
from jaxgpt_tools.upstream_record import patch_script


def _needs_log(name: str):
    return pytest.mark.upstream_logs(name)  # skipped without the log, failed under the switch (conftest.py)


def _records():
    return [pytest.param(name, marks=_needs_log(name), id=name) for name in RECORD_CODE_CHECKED]


@pytest.mark.parametrize("name", _records())
def test_every_change_applies_exactly_once_and_is_listed(name):
    loaded = rc.load(name, checks.EOT)
    assert [change["name"] for change in loaded.applied] == [patch.name for patch in record_changes.changes(name, checks.EOT)]
    assert all(change["line"] >= 1 and change["reason"] for change in loaded.applied)
    assert set(loaded.snippets) == set(record_changes.RECORD_SNIPPETS[name])
    script = rc.record_script(name)
    with pytest.raises(ValueError, match="matched 2 times"):  # a change that would apply twice is refused
        patch_script("import torch.distributed as dist\n" + script, record_changes.changes(name, checks.EOT))


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["forward", "training"])
@pytest.mark.parametrize("name", _records())
def test_each_framework_against_the_records_own_code(name, kind):
    """fp32 logits within 1e-5 of max|logit|, loss within 1e-6, gradients within the lineage rows'
    bounds at two windows; a short run of the record's own optimizers and schedules within 5x the
    q90 of its own floor's 7 samples (record_code_forward, record_code_training)."""
    result = CHECKS[f"record_code_{name.replace('-', '_')}_{kind}"]()
    assert result.passed, f"{result.name}: {result.record_code}; asserted {result.tolerance}; {result.notes}"


@pytest.mark.parametrize("name", [pytest.param(n, marks=_needs_log(n), id=n) for n in ("untie-embed", "unet-value-embeds")])
def test_without_the_as_written_roundings_the_records_logits_are_missed(name):
    """The switch matters and the check can fail: torch_ref with fp32 rotary tables
    (as_written_roundings=False) misses the record's own logits by far more than fp32 rounding."""
    from jaxgpt.config import with_fields
    from torch_ref import model as torch_model
    from torch_ref.run import convert as torch_convert
    state, inputs, targets = checks.initial_state(name), *checks.tokens(3)
    loaded = rc.load(name, checks.EOT)
    record_model = rc.build_model(loaded, checks.dims(name))
    rc.load_state(record_model, state)
    window = checks.WINDOWS[name][0]
    reference = rc.forward(loaded, record_model, *checks.record_batch(name, inputs[None], targets[None]), window,
                           backward=False)
    for as_written, bound in ((True, 1e-5), (False, None)):
        gpt = torch_model.GPT.from_config(with_fields(checks.model_config(name), as_written_roundings=as_written),
                                          attention="sdpa", fp8_head=False)
        torch_convert.load_record_state_dict(gpt, state)
        with torch.no_grad():
            _, logits, _ = torch_ref_output(gpt.eval(), inputs, targets, checks.framework_window(name, window))
        gap = float(np.abs(logits - reference.logits).max() / np.abs(reference.logits).max())
        if bound is not None:
            assert gap < bound  # fp32: summation order only
        else:
            assert gap > 1e-4  # measured 5e-4 (#8) and 4e-4 (#15): bf16 table entries, 2^-9 relative


@pytest.mark.parametrize("name", [pytest.param("unet-value-embeds", marks=_needs_log("unet-value-embeds"))])
def test_unet_value_embeds_tables_as_its_compiled_run_built_them(name):
    """#15's harness builds its tables as its compiled run did (fp32 positions and angles from the
    bf16 inv_freq, cos/sin stored bf16): equal to both frameworks' 'full_bf16_freq' tables, and
    not to the eager reading (positions and angles rounded to bf16)."""
    from jaxgpt import rotary as rotary_lib
    from torch_ref import rotary as torch_rotary

    loaded = rc.load(name, checks.EOT)
    model = rc.build_model(loaded, rc.Dims(1000, 2, 1, 128))
    rotary = model.transformer.h[0].attn.rotary
    assert rotary.inv_freq.dtype == torch.bfloat16  # the run's buffer dtype, kept
    rotary(torch.zeros(1, 2048, 1, 128))  # builds and caches (T, 64) tables
    cos = rotary.cos_cached.float()
    assert rotary.cos_cached.dtype == torch.bfloat16
    torch_cos = torch_rotary.rotary_tables(128, 2048, kind="full_bf16_freq")[0]
    assert torch.equal(cos, torch_cos)  # the same torch ops: bit for bit
    jax_cos = rotary_lib.rotary_tables(128, 2048, "full_bf16_freq")[0]
    assert np.mean(jax_cos != cos.numpy()) < 1e-4  # libm ulps flip a bf16 rounding in a handful of entries
    eager = torch_rotary.rotary_tables(128, 2048, kind="full_bf16_freq_eager")[0]
    assert not torch.equal(cos, eager)


@pytest.mark.slow
@pytest.mark.parametrize("name", [pytest.param("untie-embed", marks=_needs_log("untie-embed"))])
def test_compare_checkpoint_on_a_checkpoint_in_the_records_own_names(name, tmp_path, capsys):
    """`scripts/compare_checkpoint.py CKPT --preset untie-embed
    --head-dim 128 --json` on a checkpoint saved in #8's own names gives logits equal to #8's own
    code within 1e-5 of the largest logit (both frameworks; fp32 rounding only)."""
    from jaxgpt.data import write_shard
    from jaxgpt.testing import document_layout
    from jaxgpt_tools.parity.measures import perturb_parameters
    from scripts import compare_checkpoint as command

    loaded = rc.load(name, checks.EOT)
    torch.manual_seed(0)
    model = rc.build_model(loaded, rc.Dims(1000, 12, 1, 128))  # one head of 128, the records' head dim
    perturb_parameters(model, 0)
    checkpoint, shard, dump = tmp_path / "state.pt", tmp_path / "tokens.bin", tmp_path / "logits.npz"
    torch.save({"model": {f"_orig_mod.{k}": v for k, v in model.state_dict().items()}, "step": 0}, checkpoint)
    stream = document_layout("record_like", 1100, vocab_size=1000, eot_id=checks.EOT, seed=5)
    write_shard(shard, stream)
    assert command.main([str(checkpoint), "--preset", name, "--head-dim", "128", "--tokens", str(shard), "--eot-id",
                         str(checks.EOT), "--json", "--dump-logits", str(dump)]) == 0
    report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert report["seq_len"] == 1024 and report["model"]["num_heads"] == 1  # #8's 1024-token rows
    chunk = stream[:1025]
    own = rc.forward(loaded, model, chunk[None, :-1], chunk[None, 1:], None, backward=False)
    with np.load(dump) as arrays:
        for framework in ("jax", "torch"):
            gap = float(np.abs(arrays[framework] - own.logits).max())
            assert gap <= 1e-5 * float(np.abs(own.logits).max()), framework  # fp32: summation order, libm ulps
    assert math.isclose(report["torch_loss"], own.loss, rel_tol=1e-6)
    assert math.isclose(report["jax_loss"], own.loss, rel_tol=1e-6)


def test_the_forward_rows_hold_several_documents():
    """Guard: the forward rows' sequences hold several documents each (EOT only where listed):
    a full block, documents that start and end inside one block, one on a block edge, one token
    long."""
    block = 128
    for starts in checks.FORWARD_DOCUMENT_STARTS.values():
        inputs, targets = checks.documents_tokens(starts, 0)
        assert np.flatnonzero(inputs == checks.EOT).tolist() == list(starts) and len(starts) >= 4
        assert np.array_equal(inputs[1:], targets[:-1])
    starts = sorted({s for group in checks.FORWARD_DOCUMENT_STARTS.values() for s in group})
    spans = [(s, e) for group in checks.FORWARD_DOCUMENT_STARTS.values() for s, e in zip(group, [*group[1:], checks.SEQ_LEN], strict=True)]
    assert any(s // block == (e - 1) // block and s % block and e - s > 1 for s, e in spans)  # inside one block
    assert any(e - s == 1 for s, e in spans) and any(s % block == 0 and s > 0 for s in starts)
    assert any(s // block < (e - 1) // block - 1 for s, e in spans)  # a whole block inside one document


@pytest.mark.slow
@pytest.mark.parametrize("name", [pytest.param(n, marks=_needs_log(n), id=n) for n in RECORD_CODE_KINDS["capped"]])
def test_the_capped_logits_where_the_cap_bends(name):
    """The capped fp32 logits (the records' own cross-entropy input) with the head scaled until the
    largest |logit| is >= 2x the cap's scale (record_code_capped): within 1e-5 of the largest capped
    logit (the uncapped ones agree to ~4e-7 of theirs and the cap's slope is <= 1; measured <= 2.1e-6),
    the loss within 1e-6 (fp32). Runs after this file's forward rows, whose compiled jaxgpt forward it
    reuses."""
    from jaxgpt_tools.parity import record_code_capped

    found, bend = record_code_capped.capped_gaps(name)
    assert bend >= record_code_capped.BEND_FACTOR  # the cap is exercised far from linear
    for framework, gaps in found.items():
        assert gaps.capped_rel < 1e-5, (framework, gaps.describe())
        assert gaps.loss_rel < 1e-6, (framework, gaps.describe())
    result = CHECKS[f"record_code_{name.replace('-', '_')}_capped"]()
    assert result.passed, f"{result.name}: {result.record_code}; {result.notes}"


@pytest.mark.upstream_logs("unet-value-embeds", "record")
def test_the_device_plans_readings_run_the_records_own_statements():
    """The device plan's `record_readings` step (jaxgpt_tools.gpu.record_readings) compiles #15's table
    statements and #20's own Newton-Schulz on a GPU. Eagerly on the CPU, its #15 build equals #15's own
    Rotary (its class from the log, unpatched, on a bf16 model) bit for bit, and its #20 function, read
    from the script's text, equals the harness's in bf16 (the same torch ops: exact)."""
    from jaxgpt_tools.gpu import record_readings as readings
    from jaxgpt_tools.parity import record_optim

    namespace = {"torch": torch, "nn": torch.nn}
    exec(readings.definition_source(rc.record_script("unet-value-embeds"), "Rotary", "class"), namespace)  # noqa: S102
    rotary = namespace["Rotary"](128).bfloat16()  # its model's .bfloat16() reaches the buffer
    rotary(torch.zeros(1, 2048, 1, 128, dtype=torch.bfloat16))
    inv_freq = readings.rotary_inv_freq(128, "cpu")
    cos, sin = readings.rotary_build(inv_freq, 2048)
    assert torch.equal(rotary.inv_freq, inv_freq)
    assert torch.equal(rotary.cos_cached, cos) and torch.equal(rotary.sin_cached, sin)
    own = readings.record_function(rc.record_script("record"), readings.NS_FUNCTION)
    loaded = rc.load("record", checks.EOT)
    g = torch.randn(3, 64, 160, generator=torch.Generator().manual_seed(0))
    with record_optim.newton_schulz_dtype(loaded, "bfloat16"):
        assert torch.equal(own(g, steps=5), loaded.module.zeropower_via_newtonschulz5(g, steps=5))
