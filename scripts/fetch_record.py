"""Take the Sub3Min record's training script out of its published log, into runs/upstream/ (ignored).

    python scripts/fetch_record.py                      # downloads the log from GitHub
    python scripts/fetch_record.py --log PATH/TO/1d3bd93b-a69e-4118-aeb8-8184239d7566.txt
    python scripts/fetch_record.py --lineage-logs DIR   # the five records' logs (#8 ... #20), for
                                                        # parity_tests/test_record_code.py: JAXGPT_UPSTREAM_LOGS=DIR

The script is the log's top part, up to its first line of '=' characters; it is checked against
the record's SHA-256 (jaxgpt_tools.upstream_record.SCRIPT_SHA256). gpu_check's `record` leg runs
it; a GPU machine with no network gets it through the device tool's `carry` (artifacts/gpu/README.md).
Its code stays out of git.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from jaxgpt_tools import upstream_record
from jaxgpt_tools.common import command
from jaxgpt_tools.parity import record_code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--log", type=Path, help="a local copy of the record's log (default: download it)")
    parser.add_argument("--url", default=upstream_record.LOG_URL, help="where to download the log from")
    parser.add_argument("--out", type=Path, default=upstream_record.DEFAULT_SCRIPT, help="where the script goes")
    parser.add_argument("--no-check", action="store_true", help="keep a script whose SHA-256 is not the record's")
    parser.add_argument("--lineage-logs", type=Path, metavar="DIR",
                        help="instead: download the five records' logs into DIR/<folder>/<file> (jaxgpt_tools.parity.record_code)")
    args = parser.parse_args(argv)

    def fetch() -> None:
        if args.lineage_logs is not None:
            paths = record_code.download_logs(args.lineage_logs)
            print(f"wrote {len(paths)} logs under {args.lineage_logs}; set {record_code.LOGS_ENV}={args.lineage_logs}")
            return
        path = upstream_record.fetch(args.out, log=args.log, url=args.url, check=not args.no_check)
        print(f"wrote {path} (SHA-256 {upstream_record.sha256(path.read_text())})")

    return command.run("fetch_record", fetch)


if __name__ == "__main__":
    sys.exit(main())
