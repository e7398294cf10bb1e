"""The parity suite's mutation score: `python scripts/mutants.py [--mutants id1,id2] [--write-docs]`
(or `make mutants`); see jaxgpt_tools/mutants/."""

import sys

from jaxgpt_tools.mutants.cli import main

if __name__ == "__main__":
    sys.exit(main())
