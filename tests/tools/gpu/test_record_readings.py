"""jaxgpt_tools.gpu.record_readings on the CPU (the device plan's stand-in of its `record_readings`
step, device_steps.record_readings): a definition cut out of a script, #15's table statements
against both readings, the record's Newton-Schulz run from its text, the step's JSON. (Its
statements against #15's own Rotary and #20's own function: parity_tests/test_record_code.py.)"""

from __future__ import annotations

import json

import pytest
import torch

from jaxgpt_tools.gpu import device_steps
from jaxgpt_tools.gpu import record_readings as readings

SCRIPT = '''import torch

@torch.compile
def zeropower_via_newtonschulz5(G, steps):
    X = G.bfloat16()
    # a comment inside

    for _ in range(steps):
        X = 1.5 * X - 0.5 * (X @ X.mT) @ X
    return X

# a comment after
class Other:
    pass
'''


def test_a_definition_is_cut_out_without_its_decorator_up_to_the_next_statement():
    source = readings.definition_source(SCRIPT, "zeropower_via_newtonschulz5")
    assert source.startswith("def zeropower_via_newtonschulz5(G, steps):") and "return X" in source
    assert "@torch.compile" not in source and "class Other" not in source
    assert readings.definition_source(SCRIPT, "Other", "class").startswith("class Other:")
    with pytest.raises(ValueError, match="found 0"):
        readings.definition_source(SCRIPT, "missing")
    with pytest.raises(ValueError, match="found 2"):
        readings.definition_source(SCRIPT + SCRIPT, "zeropower_via_newtonschulz5")


def test_the_table_statements_are_the_eager_reading_and_not_the_projects():
    result = readings.rotary_tables("cpu", compiled=False)
    assert result["dtypes"] == {"eager": "torch.bfloat16"}  # an int64 x bf16 outer product is bf16
    for table in ("cos", "sin"):
        assert result["eager_vs_eager_reading"][table]["entries_differing"] == 0
        assert result["eager_vs_project"][table]["fraction_differing"] > 0.5  # bf16 angles: most entries differ
    assert "skipped" in result["compiled"]


def test_the_records_function_runs_from_its_text_and_the_step_writes_its_json(tmp_path):
    function = readings.record_function(SCRIPT, "zeropower_via_newtonschulz5")
    assert function(torch.eye(4), steps=1).dtype == torch.bfloat16
    script = tmp_path / "train_gpt.py"
    script.write_text(SCRIPT)
    out = tmp_path / "record_readings.json"
    result = device_steps.record_readings(out, cpu=True, record_script=script)
    assert json.loads(out.read_text()) == json.loads(json.dumps(result))
    assert set(result["newton_schulz_20"]["shapes"]) == {"64x64", "64x256"} and "skipped" in result["newton_schulz_20"]["compiled"]
    absent = device_steps.record_readings(out, cpu=True, record_script=tmp_path / "none.py")
    assert "no zeropower_via_newtonschulz5" in absent["newton_schulz_20"]["skipped"] and "rotary_15" in absent
