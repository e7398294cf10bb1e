"""jaxgpt_tools.gpu.tile_sweep (scripts/tile_sweep.py): its settings, and a sweep on this tree that stops
at once (the timed sweep needs a GPU; on a CPU the Pallas interpreter takes minutes per setting)."""

from __future__ import annotations

import json

from jaxgpt.kernels.flash_attention import KernelTiles
from jaxgpt_tools.gpu import tile_sweep


def test_every_setting_is_a_distinct_kernel_launch():
    settings = tile_sweep.candidates()
    assert len(settings) == len(set(settings)) == 4 * 2 * 3
    assert all(isinstance(KernelTiles(*setting), KernelTiles) for setting in settings)


def test_a_spent_budget_stops_the_sweep_and_says_where(tmp_path, capsys):
    out = tmp_path / "sweep.jsonl"
    tile_sweep.sweep(kernels=["forward"], windows=[1], seq_len=256, repeats=1, limit=1, budget_s=-1.0,
                     compile_only=False, out_path=out)
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert records[0]["shape"] == [1, 256, 6, 128] and records[0]["windows"] == [1]
    assert records[1] == {"stopped": "budget of -1.0 s spent", "next": ["forward", [64, 64, 4, 1]]}
    assert "elapsed_s" in records[-1] and len(records) == 3
    assert capsys.readouterr().out.count("RESULT ") == 3


def test_mosaic_settings_are_distinct_pipelines_and_the_sweep_names_its_implementation(tmp_path):
    from jaxgpt.kernels.mosaic_attention import MosaicKernelTiles

    for kernel, count in (("forward", 2 * 2 * 2 * 2), ("dq", 2 * 3), ("dkdv", 2 * 3)):
        settings = tile_sweep.candidates("mosaic", kernel)
        assert len(settings) == len(set(settings)) == count, kernel
        for setting in settings:
            MosaicKernelTiles(*setting).check(kernel)  # each is a setting that kernel accepts
    assert tile_sweep.candidates("mosaic", "forward")[0] == (64, 2, True, 2)  # the new schedules first
    out = tmp_path / "sweep.jsonl"
    tile_sweep.sweep(kernels=["dq"], windows=[1], seq_len=256, repeats=1, limit=1, budget_s=-1.0,
                     compile_only=False, out_path=out, implementation="mosaic")
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert records[0]["implementation"] == "mosaic"
    assert records[1] == {"stopped": "budget of -1.0 s spent", "next": ["dq", [64, 2]]}


def test_kernels_take_turns_and_a_limit_cuts_each_kernels_own_list():
    turns = tile_sweep._turns("mosaic", ["forward", "dq"], limit=None)
    assert [kernel for _, kernel in turns[:4]] == ["forward", "dq", "forward", "dq"]
    assert len(turns) == 16 + 6 and [kernel for _, kernel in turns[12:]] == ["forward"] * 10  # forward has more
    assert tile_sweep._turns("mosaic", ["forward", "dkdv"], limit=1) == [((64, 2, True, 2), "forward"), ((64, 2), "dkdv")]
