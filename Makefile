# drmario-kit: `make test` sets up .venv (if missing) and runs every check; `make run` runs the kit.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Without an NVIDIA GPU, pin torch to the CPU build of 2.13.0 (any other version downloads CUDA).
TORCH_PIN := $(if $(shell command -v nvidia-smi 2>/dev/null),,torch==2.13.0)

.PHONY: install test lint format run bench clean

install: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(if $(TORCH_PIN),$(BIN)/python -m pip install -q "$(TORCH_PIN)")
	$(BIN)/python -m pip install -q -e ".[dev]"
	@touch $@

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: install
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

test: lint
	$(BIN)/python -m pytest

run: install
	$(BIN)/python -m drmario play --seed 1234 --level 5

bench: install
	$(BIN)/python bench/engine.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis
