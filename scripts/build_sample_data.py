#!/usr/bin/env python
"""Build the built-in sample shards (Python standard-library documentation, a few M tokens)
into --out (default data/sample); a no-op when <out>/.complete exists and the shards are in
the encoding a build would use now (GPT-2 BPE when its files are available). See docs/DATA.md."""

from __future__ import annotations

import argparse
import sys
import time

from jaxgpt.corpus import stdlib_docs as sample_data
from jaxgpt_tools.common import command


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default="data/sample", help="output folder (default data/sample)")
    parser.add_argument("--force", action="store_true", help="rebuild even if .complete exists")
    parser.add_argument("--limit-modules", type=int, default=None, help="only the first N modules (quick subset)")
    args = parser.parse_args(argv)
    if sample_data.is_up_to_date(args.out) and not args.force:
        print(f"sample data already built in {args.out} (delete it or pass --force to rebuild)")
        return 0

    def build() -> None:
        start = time.perf_counter()
        meta = sample_data.build_sample_data(args.out, limit_modules=args.limit_modules, force=True, progress=True)
        print(f"wrote {len(meta['shards'])} shards to {args.out} in {time.perf_counter() - start:.1f}s: "
              f"{meta['val_tokens']:,} val + {meta['train_tokens']:,} train tokens, encoding {meta['encoding']}")

    return command.run("build_sample_data", build)


if __name__ == "__main__":
    sys.exit(main())
