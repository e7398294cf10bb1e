"""A mutation score of the parity suite: a catalogue of semantic mutants of the record and the
lineage (`catalogue`), each applied to a private copy of the repository (`apply`), its targeted
tests run first and then the suite (`run`), and the kill matrix rendered into docs/PARITY.md
(`matrix`). `python scripts/mutants.py` (`make mutants`) is the command."""
