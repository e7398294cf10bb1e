# Two commands do everything on a fresh machine: `make train` and `make test`.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
# CPU build of PyTorch; a GPU user installs a CUDA build instead (see README).
TORCH_SPEC ?= torch==2.13.0
SAMPLE := data/sample/.complete

# Compile-only GPU plans (scripts/gpu_plan.py) need the jax CUDA plugin, kept in its own venv so
# that .venv's CPU runs never load it; the plugin is pinned to .venv's jax version.
# `make gpu-plan GPU_VENV=.venv` installs it into .venv instead (CPU runs there then log that
# CUDA could not be initialised before falling back to the CPU).
GPU_VENV ?= .venv-gpu-aot
GPU_STAMP := $(GPU_VENV)/.gpu-aot-installed
GPU_PLAN_ARGS ?= --preset record --device h100 --devices 1

# The GPU image's versions (python 3.12, jax 0.11.2) on the CPU: its own venv, the quick loop.
# No CPU build of torch installs for python 3.12 from this machine's registries (PyPI's is a
# multi-GB CUDA build), so the torch tests skip there with the reason (conftest.py) and
# parity_tests/, which compares against torch_ref throughout, is left out.
COMPAT_VENV ?= .venv-compat
COMPAT_JAX ?= 0.11.2
COMPAT_PYTHON ?= python3.12

# Inductor's H100 output code compiled without a GPU (the fusion study; docs/spec/GPU_COMPILE_NOTES.md,
# "TorchInductor for an H100"): a CUDA build of torch with its triton, in a venv of its own, pinned,
# so that .venv (CI's) keeps its CPU torch; `make test` never needs it (its legs skip without it).
TORCH_CUDA_VENV ?= .venv-torch-cuda
TORCH_CUDA_SPEC ?= torch==2.14.1
TORCH_CUDA_STAMP := $(TORCH_CUDA_VENV)/.installed

# The lent GPU machine's torch (2.11.0 with triton 3.6.0) on the CPU, pinned, in a venv of its own so
# that .venv (CI's) keeps its CPU torch: scripts/torch_api_check.py resolves every torch API that the
# record's script and torch_ref's CUDA branches call, binds their arguments, and runs what a CPU allows
# of them (jaxgpt_tools/gpu/torch_api.py). PyPI's Linux wheel is a CUDA build: ~4.6 GB with its
# nvidia-* and triton dependencies, about 2 minutes to download and install here. The record's exercises read its
# script (runs/upstream/) or its log (../shared/upstream), and skip without them.
TORCH_API_VENV ?= .venv-torch211
TORCH_API_SPEC ?= torch==2.11.0
TORCH_API_STAMP := $(TORCH_API_VENV)/.installed-$(subst ==,-,$(TORCH_API_SPEC))
TORCH_API_JSON ?= artifacts/gpu/torch_$(patsubst torch==%,%,$(TORCH_API_SPEC))_api.json

.PHONY: train test lint test-compat setup sample clean gpu-plan gpu-aot torch-cuda torch-api-check fusion fusion-quick

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet "$(TORCH_SPEC)"
	$(PY) -m pip install --quiet -e ".[torch,test,plot]"
	touch $@

setup: $(VENV)/.installed

$(SAMPLE): $(VENV)/.installed
	$(PY) scripts/build_sample_data.py --out data/sample

sample: $(SAMPLE)

train: $(SAMPLE)
	$(PY) -m jaxgpt.train --preset tiny --save-checkpoint

# Two pytest workers (pytest-xdist), one test file each at a time so that a file's module-scoped
# fixtures (one training run shared by its tests) are built once: most tests compile on one core.
TEST_WORKERS ?= 2

test: $(SAMPLE)
	$(PY) -m pytest tests parity_tests -m "not gpu" -n $(TEST_WORKERS) --dist loadfile --durations=25

# ruff (the rules in pyproject.toml; `ruff format` is not applied: the hanging-indent style is kept)
# and mypy over the four packages; both pinned by the lint extra, installed into .venv once.
$(VENV)/.lint-installed: pyproject.toml $(VENV)/.installed
	$(PY) -m pip install --quiet -e ".[lint]"
	touch $@

lint: $(VENV)/.lint-installed
	$(VENV)/bin/ruff check jaxgpt torch_ref runkit jaxgpt_tools scripts
	$(VENV)/bin/mypy

$(COMPAT_VENV)/.installed: pyproject.toml
	PYENV_VERSION=3.12.1 $(COMPAT_PYTHON) -m venv $(COMPAT_VENV)
	$(COMPAT_VENV)/bin/pip install --quiet "jax==$(COMPAT_JAX)" "jaxlib==$(COMPAT_JAX)" -e ".[test,plot]"
	touch $@

test-compat: $(COMPAT_VENV)/.installed $(SAMPLE)
	$(COMPAT_VENV)/bin/python -c 'import jax, sys; print("python", sys.version.split()[0], "jax", jax.__version__)'
	$(COMPAT_VENV)/bin/python -m pytest tests -m "not slow and not gpu" -n $(TEST_WORKERS) --dist loadfile

$(GPU_STAMP): $(VENV)/.installed
	test -x $(GPU_VENV)/bin/python || $(PYTHON) -m venv $(GPU_VENV)
	$(GPU_VENV)/bin/pip install --quiet "jax[cuda13]==$$($(PY) -c 'import jax; print(jax.__version__)')" "$(TORCH_SPEC)"
	$(GPU_VENV)/bin/pip install --quiet -e ".[gpu-aot,test]"  # test: the plugin tests run with its pytest
	touch $@

gpu-plan: $(GPU_STAMP)
	$(GPU_VENV)/bin/python scripts/gpu_plan.py $(GPU_PLAN_ARGS)

gpu-aot: $(GPU_STAMP)

$(TORCH_CUDA_STAMP): pyproject.toml
	test -x $(TORCH_CUDA_VENV)/bin/python || $(PYTHON) -m venv $(TORCH_CUDA_VENV)
	$(TORCH_CUDA_VENV)/bin/pip install --quiet "$(TORCH_CUDA_SPEC)"
	$(TORCH_CUDA_VENV)/bin/pip install --quiet -e ".[torch]"  # torch already satisfied: stays the pinned build
	touch $@

torch-cuda: $(TORCH_CUDA_STAMP)

$(TORCH_API_STAMP):
	test -x $(TORCH_API_VENV)/bin/python || $(PYTHON) -m venv $(TORCH_API_VENV)
	$(TORCH_API_VENV)/bin/pip install --quiet "$(TORCH_API_SPEC)" numpy  # numpy: torch's tensor.numpy(), as the record uses
	touch $@

# No install of this project there (its jax dependencies are not needed): the repository on PYTHONPATH.
# Inductor's caches off, so that every compiled exercise compiles (and its seconds are a cold compile's).
torch-api-check: $(TORCH_API_STAMP)
	PYTHONPATH=. TORCHINDUCTOR_FORCE_DISABLE_CACHES=1 $(TORCH_API_VENV)/bin/python scripts/torch_api_check.py \
		--json $(TORCH_API_JSON)

# The fusion study (docs/FUSION.md, artifacts/fusion/): everything that runs on this machine,
# both compilers' H100 code compiled without a GPU included (their venvs are built first).
# 47m47s from a fresh clone with its venvs built (which took 7m34s: make setup gpu-aot torch-cuda),
# 2-core AVX2-only EPYC, at 93c1f74, a few short tests (about 3 min) beside it on the core its timing
# leaves free (all 32 timings idle): CPU legs 32.3 min, H100 legs compiled without a GPU 15.2 min.
FUSION_ARGS ?= --write-docs
fusion: $(VENV)/.installed $(GPU_STAMP) $(TORCH_CUDA_STAMP)
	$(PY) scripts/fusion_report.py $(FUSION_ARGS)

# fusion-quick: the QKV path at the small shape, this CPU only, short timing; writes runs/fusion/ and no
# page (48 s from a fresh clone with its venv built, 2-core AVX2-only EPYC, at d9eb750).
fusion-quick: $(VENV)/.installed
	$(PY) scripts/fusion_report.py --quick

# The parity suite's mutation score (jaxgpt_tools/mutants/, docs/PARITY.md "Mutation score"): each
# mutant of the catalogue applied to a private copy of HEAD's files (the checkout is never edited), its
# targeted tests first, then the suite; the kill matrix printed and written into PARITY.md's own section.
# MUTANTS=id1,id2 runs a subset (results are merged by id); MUTANTS_ARGS: --no-suite, --suite-timeout S...
MUTANTS ?=
MUTANTS_ARGS ?= --write-docs
.PHONY: mutants
mutants: $(SAMPLE)
	$(PY) scripts/mutants.py --mutants "$(MUTANTS)" $(MUTANTS_ARGS)

clean:
	rm -rf $(VENV) $(GPU_VENV) $(COMPAT_VENV) $(TORCH_CUDA_VENV) $(TORCH_API_VENV) data/sample
