"""Parity checks shared by pytest (parity_tests/test_checks.py; the lineage's in
parity_tests/test_lineage_checks.py) and the report
(`python scripts/parity_report.py` -> docs/PARITY.md): one list, so the two cannot drift apart.

The rows live by subject: `checks_ns` (Newton-Schulz), `checks_forward` (the record's model at its
own shapes, the lineage presets' forwards), `checks_trajectory` (the trainers' short runs), and the
records' own code (`record_code_forward`, `record_code_training`, `record_code_optimizer`,
`record_code_capped`); this module holds the one list.

Each check measures one cross-framework difference and returns a `Result`: the max absolute and
relative error, the tolerance with its reason, and pass/fail. Training runs are cached per
process, so the report's plot and the trajectory rows come from the same runs.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from jaxgpt_tools.parity.checks_forward import LINEAGE_CHECKED, check_lineage_forward, check_record_shape_fp32
from jaxgpt_tools.parity.checks_ns import (
    check_ns_bf16_five_steps,
    check_ns_bf16_one_iteration,
    check_ns_fp32_five_steps,
)
from jaxgpt_tools.parity.checks_trajectory import (
    check_lineage_trajectory,
    check_trajectory_bf16_ns,
    check_trajectory_fp32_ns,
    check_trajectory_fp32_ns_signal,
)
from jaxgpt_tools.parity.measures import Result

# ---------------------------------------------------------------------------------------------
# Each record against its own code (jaxgpt_tools.parity.record_code_checks): the five records' rows

RECORD_CODE_CHECKED = ("untie-embed", "shortcuts", "unet-value-embeds", "softcap", "record")


# The kinds of record-code row and the records each runs on: #8 has no soft-cap (its rows compare
# its plain logits), so the capped row is #9-#20's.
# The bf16 rows are #15-#20's (explicit casts; #8/#9's autocast is not their run on a CPU), the FP8
# head's #20's.
RECORD_CODE_KINDS = {"forward": RECORD_CODE_CHECKED, "training": RECORD_CODE_CHECKED,
                     "optimizer": RECORD_CODE_CHECKED, "capped": RECORD_CODE_CHECKED[1:],
                     "bf16": RECORD_CODE_CHECKED[2:], "bf16_optimizer": RECORD_CODE_CHECKED[2:],
                     "fp8_head": ("record",)}


def check_record_code(kind: str, name: str) -> Result:
    """Record `name`'s row against its own code: kind "forward", "training", "optimizer" (the same
    gradients through its own optimizers), "capped" (the capped logits where the cap bends), "bf16"
    (its own precision, record_code_bf16), "bf16_optimizer" (its optimizers over its bf16 model,
    record_code_bf16_optimizer) or "fp8_head" (#20's FP8 op).
    Raises FileNotFoundError (naming scripts/fetch_record.py) when the record's log is absent."""
    from jaxgpt_tools.parity import (
        record_code_bf16,
        record_code_bf16_optimizer,
        record_code_capped,
        record_code_forward,
        record_code_optimizer,
        record_code_training,
    )

    rows = {"forward": record_code_forward.check_record_forward, "training": record_code_training.check_record_training,
            "optimizer": record_code_optimizer.check_record_optimizer, "capped": record_code_capped.check_record_capped,
            "bf16": record_code_bf16.check_record_bf16_forward,
            "bf16_optimizer": record_code_bf16_optimizer.check_record_bf16_optimizer,
            "fp8_head": lambda _: record_code_bf16.check_record_fp8_head()}
    return rows[kind](name)


CHECKS: dict[str, Callable[[], Result]] = {
    "ns_bf16_one_iteration": check_ns_bf16_one_iteration,
    "ns_bf16_five_steps": check_ns_bf16_five_steps,
    "ns_fp32_five_steps": check_ns_fp32_five_steps,
    "record_shape_fp32": check_record_shape_fp32,
    "trajectory_bf16_ns": check_trajectory_bf16_ns,
    "trajectory_fp32_ns": check_trajectory_fp32_ns,
    "trajectory_fp32_ns_signal": check_trajectory_fp32_ns_signal,
    **{f"lineage_{name.replace('-', '_')}_forward": functools.partial(check_lineage_forward, name)
       for name in LINEAGE_CHECKED},
    **{f"lineage_{name.replace('-', '_')}_trajectory": functools.partial(check_lineage_trajectory, name)
       for name in LINEAGE_CHECKED},
    **{f"record_code_{name.replace('-', '_')}_{kind}": functools.partial(check_record_code, kind, name)
       for name in RECORD_CODE_CHECKED for kind, names in RECORD_CODE_KINDS.items() if name in names},
}
