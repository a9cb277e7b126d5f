# asrtrain: `make demo` runs the embedded recipe end to end, `make test` the fast tests.
# Every target installs what is missing first (apt packages, the venv, the package).

SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
APT_PACKAGES := espeak-ng sox sctk flac
PYTEST_FAST := -m "not slow" --durations=25

# Which torch build: `make install TORCH=cpu` (the default: PyTorch's CPU index, about 200 MB,
# no CUDA packages) or `TORCH=cuda` (PyPI's default Linux build, several GB of CUDA packages).
# A plain `pip install torch` is the CUDA build on Linux, whatever the machine has; the choice
# is remembered in the venv, so a later `make test` keeps it.
TORCH_VERSION := 2.13.0
TORCH_CHOICE := $(VENV)/torch-build
TORCH ?= $(or $(shell cat $(TORCH_CHOICE) 2>/dev/null),cpu)
ifeq ($(filter $(TORCH),cpu cuda),)
$(error TORCH must be cpu or cuda, not '$(TORCH)')
endif
TORCH_CPU_INDEX := https://download.pytorch.org/whl/cpu
PIP := $(BIN)/python -m pip
# cpu: a local CPU wheel where pip's find-links has one (then its dependencies from the usual
# index), else the CPU index; `==V+cpu` admits no other build, and replaces one installed.
define install_torch_cpu
if $(PIP) install -q --no-index --no-deps "torch==$(TORCH_VERSION)+cpu" 2>/dev/null; then \
  $(PIP) install -q "torch==$(TORCH_VERSION)+cpu"; \
else \
  $(PIP) install -q "torch==$(TORCH_VERSION)+cpu" --index-url $(TORCH_CPU_INDEX); \
fi
endef
install_torch_cuda = $(PIP) install -q "torch==$(TORCH_VERSION)"

.PHONY: install apt test test-all demo lint clean help FORCE

help:
	@echo "make demo      synthesize a corpus, train with H-ADPSGD on 4 local learners, decode, print the WER"
	@echo "make install   the venv and the package; TORCH=cpu (default) or TORCH=cuda picks torch's build"
	@echo "make test      lint, then the fast tests (under 15 minutes on 2 cores)"
	@echo "make test-all  every test, the slow ones too"
	@echo "make lint      ruff and mypy"
	@echo "make clean     remove the venv, caches and demo outputs"

install: $(STAMP)
	@$(BIN)/python scripts/torch_build.py $(TORCH)

# Rewritten only when the choice changes, so that a change reinstalls torch.
$(TORCH_CHOICE): FORCE
	@mkdir -p $(VENV)
	@[ "$$(cat $@ 2>/dev/null)" = "$(TORCH)" ] || echo "$(TORCH)" > $@

apt:
	@missing=""; \
	command -v espeak-ng >/dev/null || missing="$$missing espeak-ng"; \
	command -v sox >/dev/null || missing="$$missing sox"; \
	command -v sclite >/dev/null || test -x /usr/lib/sctk/bin/sclite || missing="$$missing sctk"; \
	command -v flac >/dev/null || missing="$$missing flac"; \
	if [ -n "$$missing" ]; then \
	  echo "installing apt packages:$$missing"; \
	  if [ "$$(id -u)" != 0 ]; then SUDO=sudo; else SUDO=; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null; \
	fi

$(STAMP): pyproject.toml setup.cfg $(TORCH_CHOICE) | apt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(install_torch_$(TORCH))
	$(BIN)/python scripts/torch_build.py $(TORCH)
	$(BIN)/python -m pip install -q -e ".[mpi,plot,dev,corpora]"
	$(BIN)/python -m asrtrain.decode.native
	touch $(STAMP)

# Lint first: CI runs `make test`, so what lint reports fails CI as a failing test does.
test: apt $(STAMP) lint
	OMP_NUM_THREADS=1 $(BIN)/pytest $(PYTEST_FAST) -q

test-all: apt $(STAMP) lint
	OMP_NUM_THREADS=1 $(BIN)/pytest -q

demo: apt $(STAMP)
	PATH=$(CURDIR)/$(BIN):$$PATH bash recipes/synth/run.sh --config conf/demo.conf

lint: $(STAMP)
	$(BIN)/ruff check asrtrain tests scripts
	$(BIN)/mypy asrtrain

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache build *.egg-info recipes/synth/exp recipes/synth/data
	rm -f asrtrain/decode/csrc/_latgen.so
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
