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

    settings = tile_sweep.candidates("mosaic")
    assert len(settings) == len(set(settings)) == 2 * 3
    for setting in settings:
        MosaicKernelTiles(*setting).check("forward")  # each is a setting the kernels accept
    out = tmp_path / "sweep.jsonl"
    tile_sweep.sweep(kernels=["dq"], windows=[1], seq_len=256, repeats=1, limit=1, budget_s=-1.0,
                     compile_only=False, out_path=out, implementation="mosaic")
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert records[0]["implementation"] == "mosaic"
    assert records[1] == {"stopped": "budget of -1.0 s spent", "next": ["dq", [64, 2]]}
