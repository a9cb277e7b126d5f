# asrtrain: `make demo` runs the embedded recipe end to end, `make test` the fast tests.
# Every target installs what is missing first (apt packages, the venv, the package).

SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
APT_PACKAGES := espeak-ng sox sctk flac
# The CPU wheel: an unpinned torch pulls several GB of CUDA packages.
TORCH_PIN := torch==2.13.0
PYTEST_FAST := -m "not slow" --durations=25

.PHONY: install apt test test-all demo lint clean help

help:
	@echo "make demo      synthesize a corpus, train with H-ADPSGD on 4 local learners, decode, print the WER"
	@echo "make test      lint, then the fast tests (under 15 minutes on 2 cores)"
	@echo "make test-all  every test, the slow ones too"
	@echo "make lint      ruff and mypy"
	@echo "make clean     remove the venv, caches and demo outputs"

install: $(STAMP)

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

$(STAMP): pyproject.toml setup.cfg | apt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q $(TORCH_PIN)
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
