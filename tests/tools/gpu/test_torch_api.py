"""jaxgpt_tools.gpu.torch_api under CI's torch: every torch API of the GPU-only code paths (the
record's script, torch_ref's CUDA branches) is accepted, a missing name or an unknown keyword
fails its row, the listed places still hold what they name, and the quick exercises run.
(`make torch-api-check` runs the same under the GPU machine's torch; nothing here needs it.)"""

from __future__ import annotations

import json

import pytest
import torch

from jaxgpt_tools.gpu import torch_api, torch_exercises
from jaxgpt_tools.gpu.torch_api import ApiUse, Site
from scripts import torch_api_check

SITE = (Site("torch_ref/fp8.py", "torch._scaled_mm("),)


def test_every_listed_api_is_accepted_by_the_installed_torch():
    failed = [row for row in torch_api.check_uses() if not row["ok"]]
    assert not failed, f"torch {torch.__version__}: {failed}"


def test_a_missing_attribute_fails_its_row():
    row = torch_api.check_use(ApiUse("torch.cuda.no_such_function", SITE))
    assert row["ok"] is False and "missing" in row["problem"] and "'no_such_function'" in row["problem"]
    # A module that is not there fails the same way (torch.cuda is imported on the way; this is not).
    row = torch_api.check_use(ApiUse("torch._inductor.no_such_config.flag", SITE, call=False))
    assert row["ok"] is False and "'no_such_config'" in row["problem"]


@pytest.mark.parametrize(("name", "positional", "keywords", "how"), [
    ("torch._scaled_mm", 2, ("scale_a", "scale_b"), "op schema"),  # a C++ builtin: no signature, no docstring
    ("torch.nn.attention.flex_attention.flex_attention", 3, ("scale",), "signature"),
    ("torch.tensor", 1, ("dtype",), "docstring"),  # torch's C++ binding with its signature line
])
def test_an_unknown_keyword_fails_its_row(name, positional, keywords, how):
    good = torch_api.check_use(ApiUse(name, SITE, positional, keywords))
    assert good["ok"] is True and good["checked"].startswith(how), good
    row = torch_api.check_use(ApiUse(name, SITE, positional, (*keywords, "scale_x")))
    assert row["ok"] is False and "'scale_x'" in row["problem"]


def test_an_absent_optional_name_passes_and_says_so():
    row = torch_api.check_use(ApiUse("torch.distributed.no_such_gather", SITE, optional=True, note="falls back"))
    assert row["ok"] is True and "absent" in row["checked"]


def test_each_listed_place_holds_what_it_names():
    try:
        record = torch_exercises.record_source().splitlines()
    except torch_exercises.Skipped:
        record = None  # neither the fetched script nor its log: torch_ref's places are still checked
    for site in [s for use in torch_api.API_USES for s in use.sites] + [s for e in torch_exercises.EXERCISES for s in e.sites]:
        if site.line is None:
            assert torch_api.site_lines(site), f"{site.path} no longer holds {site.needle!r}"
        elif record is not None:
            assert site.needle in record[site.line - 1], f"{torch_api.RECORD}:{site.line} does not hold {site.needle!r}"


def test_the_quick_exercises_run_on_the_cpu():
    rows = torch_exercises.run_exercises(slow=False)
    assert rows and not [row for row in rows if row["ok"] is False], rows
    assert all(row["name"].startswith("exercised: ") for row in rows)


def test_the_command_writes_the_rows_and_exits_0(tmp_path, capsys):
    out = tmp_path / "api.json"
    assert torch_api_check.main(["--no-exercise", "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["torch"] == torch.__version__ and result["failed"] == 0
    assert len(result["rows"]) == len(torch_api.API_USES)
    assert "0 failed" in capsys.readouterr().out
