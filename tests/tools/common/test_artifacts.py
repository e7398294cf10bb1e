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


def test_a_virtual_environments_interpreter_is_named_without_its_folder():
    """As nvidia-smi lists a process: the interpreter of any venv, wherever it lives."""
    text = "|    0   N/A  N/A   2016      C   /srv/torch/.venv/bin/python3      1170MiB |"
    assert repo_relative_paths(text) == "|    0   N/A  N/A   2016      C   <venv>/bin/python3      1170MiB |"
    assert repo_relative_paths("/srv/x/venv-gpu/bin/python") == "<venv>/bin/python"
    assert repo_relative_paths("/usr/bin/python3") == "/usr/bin/python3"
