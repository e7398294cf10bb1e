"""Where the five records' logs lie and how their training scripts are read out of them.

Each of the five records (#8 untie-embed, #9 shortcuts, #15 unet-value-embeds, #18 softcap, #20
record) publishes its whole training script at the top of its log (docs/spec/LINEAGE.md, "Sources").
Nothing of the scripts is stored in this repository; the logs are read from `logs_root()`
($JAXGPT_UPSTREAM_LOGS, default ../shared/upstream beside the checkout; `python
scripts/fetch_record.py --lineage-logs DIR` downloads them). Used by jaxgpt_tools.parity.record_code.

Where a log is missing, the tests that need it skip and the report's record's-code column says "not
run", with the reason: a clone without the logs still tests. With $JAXGPT_REQUIRE_UPSTREAM_LOGS=1
(`.ci/run` sets it: CI has the logs beside its clone) a missing log is an error instead: the switch
is read by `logs_required` alone, and `check_logs` is the one check every caller makes
(`python -m jaxgpt_tools.parity.record_logs` runs it up front).
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from jaxgpt_tools.common.artifacts import REPO_ROOT
from jaxgpt_tools.upstream_record import script_from_log

LOGS_ENV = "JAXGPT_UPSTREAM_LOGS"
DEFAULT_LOGS = REPO_ROOT.parent / "shared" / "upstream"
LOG_URL_BASE = "https://raw.githubusercontent.com/KellerJordan/modded-nanogpt/master/records/track_1_short"
FETCH_HINT = "python scripts/fetch_record.py --lineage-logs DIR, then JAXGPT_UPSTREAM_LOGS=DIR"
REQUIRE_ENV = "JAXGPT_REQUIRE_UPSTREAM_LOGS"


class RequiredLogsMissing(RuntimeError):
    """A record's log is absent while $JAXGPT_REQUIRE_UPSTREAM_LOGS=1: an error, not a skip."""


@dataclass(frozen=True)
class RecordLog:
    """Where a record's log lies (LINEAGE.md, "Sources"), by its preset name."""

    number: int
    folder: str
    file: str


RECORD_LOGS = {
    "untie-embed": RecordLog(8, "2024-11-03_UntieEmbed", "d6b50d71-f419-4d26-bb39-a60d55ae7a04.txt"),
    "shortcuts": RecordLog(9, "2024-11-06_ShortcutsTweaks", "dd7304a6-cc43-4d5e-adb8-c070111464a1.txt"),
    "unet-value-embeds": RecordLog(15, "2024-12-08_UNetValueEmbedsTweaks", "0069607b-aa90-49fd-9766-4368bcd168c4.txt"),
    "softcap": RecordLog(18, "2025-01-04_SoftCap", "31d6c427-f1f7-4d8a-91be-a67b5dcd13fd.txt"),
    "record": RecordLog(20, "2025-01-16_Sub3Min", "1d3bd93b-a69e-4118-aeb8-8184239d7566.txt"),
}


def logs_root() -> Path:
    """The folder holding the records' logs as <folder>/<file>: $JAXGPT_UPSTREAM_LOGS, else
    ../shared/upstream beside this checkout."""
    return Path(os.environ.get(LOGS_ENV) or DEFAULT_LOGS)


def log_path(name: str, root: Path | None = None) -> Path:
    """The log of record `name` (a preset name of RECORD_LOGS). FileNotFoundError naming how to
    get it when absent; ValueError for an unknown name."""
    if name not in RECORD_LOGS:
        raise ValueError(f"unknown record {name!r}; choose one of {sorted(RECORD_LOGS)}")
    log = RECORD_LOGS[name]
    path = (root or logs_root()) / log.folder / log.file
    if not path.is_file():
        raise FileNotFoundError(f"no log of record #{log.number} at {path}: set {LOGS_ENV} to the folder of the "
                                f"records' logs, or download them ({FETCH_HINT})")
    return path


def missing_logs(root: Path | None = None) -> list[str]:
    """The names of RECORD_LOGS whose log is absent under `root` (logs_root() by default)."""
    root = root or logs_root()
    return [name for name, log in RECORD_LOGS.items() if not (root / log.folder / log.file).is_file()]


def logs_required() -> bool:
    """Whether a missing log is an error ($JAXGPT_REQUIRE_UPSTREAM_LOGS=1, as `.ci/run` sets) rather
    than a skip (unset, empty or 0). The one place the switch is read; any other value is refused, so
    that a misspelt switch cannot turn the requirement off unseen."""
    value = os.environ.get(REQUIRE_ENV, "").strip()
    if value not in ("", "0", "1"):
        raise ValueError(f"{REQUIRE_ENV}={value!r}: set it to 1 (a missing record log is an error) or 0 / unset (skipped)")
    return value == "1"


def missing_reason(names: list[str] | tuple[str, ...] | None = None, root: Path | None = None) -> str | None:
    """None when the logs of `names` (all five by default) are under `root` (logs_root() by default);
    else one sentence naming every missing log, where it was looked for and how to get it."""
    root = root or logs_root()
    wanted = list(RECORD_LOGS) if names is None else list(names)
    if unknown := sorted(set(wanted) - set(RECORD_LOGS)):
        raise ValueError(f"unknown records {unknown}; choose among {sorted(RECORD_LOGS)}")
    missing = [name for name in missing_logs(root) if name in wanted]
    if not missing:
        return None
    logs = ", ".join(f"#{RECORD_LOGS[name].number} {name} ({RECORD_LOGS[name].folder}/{RECORD_LOGS[name].file})"
                     for name in missing)
    which = f"the logs of records {logs} are" if len(missing) > 1 else f"the log of record {logs} is"
    return (f"{which} not under {root}: set {LOGS_ENV} to the folder of the records' logs, or download them "
            f"({FETCH_HINT})")


def check_logs(names: list[str] | tuple[str, ...] | None = None, root: Path | None = None) -> str | None:
    """The check every caller makes before it would skip: None when the logs of `names` (all five by
    default) are present; else `missing_reason`'s sentence, returned for the caller to skip with (or
    to say "not run") when the logs are not required, raised as RequiredLogsMissing when they are
    (`logs_required`)."""
    reason = missing_reason(names, root)
    if reason is not None and logs_required():
        raise RequiredLogsMissing(f"{reason}; {REQUIRE_ENV}=1 makes a missing log an error, not a skip")
    return reason


def record_script(name: str, root: Path | None = None) -> str:
    """The training script at the top of record `name`'s log. #8's and #9's logs open with a line
    of '=' (their scripts print one before the source), dropped before `script_from_log` cuts at
    the next."""
    text = log_path(name, root).read_text()
    return script_from_log(re.sub(r"\A={20,}\n", "", text))


def download_logs(dest: Path, url_base: str = LOG_URL_BASE) -> list[Path]:
    """Download the five logs into dest/<folder>/<file> (the layout `logs_root` reads)."""
    import urllib.request

    written = []
    for log in RECORD_LOGS.values():
        path = Path(dest) / log.folder / log.file
        path.parent.mkdir(parents=True, exist_ok=True)
        with urllib.request.urlopen(f"{url_base}/{log.folder}/{log.file}", timeout=60) as response:  # noqa: S310
            path.write_bytes(response.read())
        written.append(path)
    return written


def main() -> int:
    """`python -m jaxgpt_tools.parity.record_logs`: 0 when the five logs are under logs_root(), else
    1 with every missing one and how to get it (the up-front check of `.ci/run`)."""
    reason = missing_reason()
    if reason is None:
        print(f"the five records' logs are under {logs_root()}")
        return 0
    print(f"error: {reason}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
