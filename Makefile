# Two commands do everything on a fresh machine: `make train` and `make test`.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
# CPU build of PyTorch; a GPU user installs a CUDA build instead (see README).
TORCH_SPEC ?= torch==2.13.0
SAMPLE := data/sample/.complete

.PHONY: train test setup sample clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet "$(TORCH_SPEC)"
	$(PY) -m pip install --quiet -e ".[test,plot]"
	touch $@

setup: $(VENV)/.installed

$(SAMPLE): $(VENV)/.installed
	$(PY) scripts/build_sample_data.py --out data/sample

sample: $(SAMPLE)

train: $(SAMPLE)
	$(PY) -m jaxgpt.train --preset tiny --save-checkpoint

test: $(SAMPLE)
	$(PY) -m pytest tests parity_tests -m "not gpu"

clean:
	rm -rf $(VENV) data/sample
