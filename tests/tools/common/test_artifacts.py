"""jaxgpt_tools.common.artifacts: generated text names no machine's folders."""

from __future__ import annotations

from jaxgpt_tools.common.artifacts import repo_relative_paths


def test_checkout_and_site_packages_paths_become_relative():
    text = ('FileNames 1 "/home/someone/src/jaxgpt/jaxgpt/model.py" 2 "/opt/venv/lib/python3.11/site-packages/jax/_src/nn.py"\n'
            "python scripts/fusion_report.py --out /tmp/x/runs/fusion-small")
    assert repo_relative_paths(text) == ('FileNames 1 "jaxgpt/model.py" 2 "<site-packages>/jax/_src/nn.py"\n'
                                         "python scripts/fusion_report.py --out runs/fusion-small")


def test_text_without_absolute_paths_is_unchanged():
    text = "runs/fusion/cpu/xla/attn_fwd_merged_small.hlo.txt, ratio 1/2, 3 // 4"
    assert repo_relative_paths(text) == text
