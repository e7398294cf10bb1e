"""jaxgpt_tools.gpu.plan_budget: the caps of the selected steps against the plan's deadline, and
the deadline against the device tool's limit on one command."""

from __future__ import annotations

import pytest

from jaxgpt_tools.gpu import plan_budget
from jaxgpt_tools.gpu.plan_budget import PlanRefused


def test_caps_inside_the_deadline_are_all_sure():
    plan = plan_budget.fit({"preflight": 30, "jaxgpt": 90, "record": 420}, deadline_s=560, margin_s=15)
    assert plan.usable_s == 545 and plan.sure == {"preflight": 30, "jaxgpt": 90, "record": 420} and not plan.notes


def test_caps_over_the_deadline_shrink_in_order_the_later_steps_first():
    caps = {"preflight": 45, "jaxgpt": 150, "torch_ref": 250, "record": 250, "attention": 120}
    plan = plan_budget.fit(caps, deadline_s=560, margin_s=15)
    # 45 + 150 + 250 = 445 of 545: the record keeps 100 s for sure, the attention bench none.
    assert plan.sure == {"preflight": 45, "jaxgpt": 150, "torch_ref": 250, "record": 100, "attention": 0}
    assert [note.split(":")[0] for note in plan.notes] == ["record", "attention"]
    assert "shrunk to 100 s" in plan.notes[0] and "only on the time the steps before it leave" in plan.notes[1]
    assert plan.as_dict()["caps_sum_s"] == 815


def test_strict_caps_refuse_with_one_line_naming_each_step():
    with pytest.raises(PlanRefused, match=r"caps sum to 815 s against 545 s.*record: cap 250 s shrunk.*--strict-caps"):
        plan_budget.fit({"preflight": 45, "jaxgpt": 150, "torch_ref": 250, "record": 250, "attention": 120},
                        deadline_s=560, margin_s=15, strict=True)
    assert plan_budget.fit({"jaxgpt": 90}, deadline_s=560, margin_s=15, strict=True).sure == {"jaxgpt": 90}


def test_a_deadline_past_one_device_command_or_inside_the_margin_is_refused():
    with pytest.raises(PlanRefused, match="past the 580 s one device command can hold"):
        plan_budget.fit({"jaxgpt": 90}, deadline_s=590, margin_s=15)
    with pytest.raises(PlanRefused, match="leaves nothing after the 15 s"):
        plan_budget.fit({"jaxgpt": 90}, deadline_s=10, margin_s=15)
