"""jaxgpt_tools.common.subprocesses: a child's output kept, its time limit, and nothing of it left
behind: a grandchild that ignores SIGTERM is ended after a normal exit, a child dies with its
parent, a process that left its group is found by its marker. No timing is asserted."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from jaxgpt_tools.common import subprocesses
from jaxgpt_tools.common.subprocesses import Launch, run_streamed


def alive(pid: int) -> bool:
    """Running and not a zombie (an orphan's zombie waits for whoever reaps orphans here)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def wait_for_file(path: Path, seconds: float = 30) -> str:
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        if path.is_file() and path.read_text().strip():
            return path.read_text().strip()
        time.sleep(0.05)
    raise AssertionError(f"{path} never written")


# A grandchild that ignores SIGTERM, its pid written to argv[1]; the child itself exits at once.
STUBBORN_GRANDCHILD = """
import subprocess, sys
code = ("import os, signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(120)")
subprocess.Popen([sys.executable, "-c", code, sys.argv[1]])
print("child done", flush=True)
"""


def test_a_grandchild_that_ignores_sigterm_is_ended_after_its_parent_exits_normally(tmp_path):
    pid_file, log = tmp_path / "grandchild.pid", tmp_path / "run.log"
    # The grandchild writes its pid before the child's group is ended: the child waits for it.
    code = STUBBORN_GRANDCHILD + f"\nimport time, os\nwhile not os.path.exists({str(pid_file)!r}): time.sleep(0.05)\n"
    status, returncode = run_streamed(Launch([sys.executable, "-c", code, str(pid_file)]), log, 60, grace_s=1)
    assert (status, returncode) == ("ok", 0)
    grandchild = int(wait_for_file(pid_file))
    deadline = time.monotonic() + 10
    while alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(grandchild)
    assert "child done" in log.read_text() and "outlived it and were ended" in log.read_text()


def test_a_child_past_its_limit_is_killed_and_its_log_kept(tmp_path):
    log = tmp_path / "run.log"
    ticks: list[float] = []
    code = "import time; print('started', flush=True); time.sleep(60)"
    status, returncode = run_streamed(Launch([sys.executable, "-c", code]), log, 1.5, on_tick=ticks.append, tick_s=0.3)
    assert (status, returncode) == ("timed_out", None)
    assert ticks and ticks == sorted(ticks)
    assert "started" in log.read_text() and "[killed after 2 s" in log.read_text()


def test_a_child_dies_with_its_parent(tmp_path):
    # The parent (a python process running run_streamed) is SIGKILLed: no finally runs in it,
    # and its child must still end (Linux's parent-death signal).
    pid_file = tmp_path / "child.pid"
    child_code = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(120)"
    parent_code = ("import sys; from pathlib import Path; from jaxgpt_tools.common.subprocesses import Launch, run_streamed; "
                   f"run_streamed(Launch([sys.executable, '-c', {child_code!r}]), Path({str(tmp_path / 'log')!r}), 120)")
    parent = subprocess.Popen([sys.executable, "-c", parent_code], env=dict(os.environ, PYTHONPATH=os.getcwd()))
    child = int(wait_for_file(pid_file))
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 10
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(child)


def test_a_process_that_left_its_group_is_found_by_its_marker_and_ended(tmp_path):
    marker = f"JAXGPT_TEST_MARKER_{os.getpid()}"
    escaped = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True,
                               env=dict(os.environ, **{marker: "step"}))
    try:
        deadline = time.monotonic() + 10
        while not subprocesses.marked_processes(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [pid for pid, _ in subprocesses.marked_processes(marker)] == [escaped.pid]
        ended = subprocesses.end_marked(marker)
        assert len(ended) == 1 and ended[0].startswith(f"{escaped.pid} ")
        assert escaped.wait(timeout=10) == -signal.SIGKILL
        assert subprocesses.marked_processes(marker) == []
    finally:
        escaped.kill()
