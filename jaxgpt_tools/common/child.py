"""A library function run in a fresh Python process: for what needs its own JAX (virtual devices
set before JAX starts, a time limit that can stop a compile) or another environment (the venv
with the jax CUDA plugin). No library code starts a command under scripts/; it calls
`call("jaxgpt_tools.bench.newton_schulz:bench_newton_schulz", {...})` instead, which runs

    python -m jaxgpt_tools.common.child MODULE:FUNCTION     (keyword arguments as JSON on stdin)

and reads the function's result, JSON, from the child's last line of stdout (its progress goes
to stderr)."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from collections.abc import Callable
from typing import Any

from jaxgpt_tools.common.artifacts import REPO_ROOT

ALLOWED_PACKAGES = ("jaxgpt.", "jaxgpt_tools.")


class ChildFailed(RuntimeError):
    """The child exited with an error (its stderr's tail is the message; `returncode` and the
    whole `stderr` for a caller that words it otherwise)."""

    def __init__(self, message: str, returncode: int = 1, stderr: str = "") -> None:
        super().__init__(message)
        self.returncode, self.stderr = returncode, stderr


def call(function: str, kwargs: dict[str, Any] | None = None, *, python: str = sys.executable,
         env: dict[str, str] | None = None, timeout_s: float | None = None,
         on_stderr_line: Callable[[str], None] | None = None) -> Any:
    """`function` ("module:name") called with `kwargs` in a child process; its JSON result.
    ChildFailed when it fails, subprocess.TimeoutExpired past `timeout_s` (the child is killed).
    `python`: another venv's interpreter; `on_stderr_line`: given each line of the child's stderr
    (its progress) once it has ended, failed or not."""
    done = subprocess.run([python, "-m", "jaxgpt_tools.common.child", function], input=json.dumps(kwargs or {}),
                          capture_output=True, text=True, cwd=REPO_ROOT, env=env, timeout=timeout_s)
    if on_stderr_line is not None:
        for line in done.stderr.splitlines():
            on_stderr_line(line)
    if done.returncode != 0:
        raise ChildFailed(f"{function} failed in a child process (exit {done.returncode}): {done.stderr[-2000:].strip()}",
                          done.returncode, done.stderr)
    return json.loads(done.stdout.strip().splitlines()[-1])


def resolve(function: str) -> Any:
    """The callable named "package.module:name"; ValueError outside jaxgpt and jaxgpt_tools."""
    module, _, name = function.partition(":")
    if not name or not module.startswith(ALLOWED_PACKAGES):
        raise ValueError(f"expected 'jaxgpt_tools.<module>:<function>' (or jaxgpt.), got {function!r}")
    return getattr(importlib.import_module(module), name)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m jaxgpt_tools.common.child MODULE:FUNCTION  (keyword arguments as JSON on stdin)",
              file=sys.stderr)
        return 2
    result = resolve(args[0])(**json.loads(sys.stdin.read() or "{}"))
    print(json.dumps(result, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
