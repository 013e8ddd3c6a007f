# drmario-kit: `make test` sets up .venv (if missing) and runs every check (the notebook chain too);
# `make run` runs the notebook pipeline with the CI profile into runs/demo.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Without an NVIDIA GPU, pin torch to 2.13.0, the version CI tests (PyPI's Linux wheel brings CUDA libraries;
# README.md: the CPU-only build from PyTorch's index).
TORCH_PIN := $(if $(shell command -v nvidia-smi 2>/dev/null),,torch==2.13.0)

.PHONY: install test lint format run data bench figures offline-check clean

install: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(if $(TORCH_PIN),$(BIN)/python -m pip install -q --no-compile "$(TORCH_PIN)")
	$(BIN)/python -m pip install -q --no-compile -e ".[dev]"
	@# pip byte-compiles on one core, this on all of them (about 25 s less on 2 cores); its errors are
	@# ignored: a file that does not compile here (torch has Python 3.12 test helpers) is as before
	$(BIN)/python -c "import compileall, sysconfig; compileall.compile_dir(sysconfig.get_path('purelib'), quiet=2, workers=0)"
	@touch $@

# ruff, the layering of drmario/ (import-linter; contracts in pyproject.toml), and the type checker (mypy: drmario/,
# bench/ and docs/figures.py).
lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/mypy

format: install
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# The suite on TEST_WORKERS processes, a test file at a time per worker (module fixtures such as the
# notebook chain run once; files with more tests first, so nbval's one-test file comes last, on
# compiled kernels, as does the wheel's round at the end of test_robustness.py), ending on its
# slowest tests.
TEST_WORKERS ?= 2
test: lint
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --durations=15

# The notebook pipeline (01 round-0 data -> 02 training -> 03 analysis) with the small CI profile, then
# the shipped network (data/networks/small.pt, from the cpu profile) against greedy and the expert;
# both resume or reuse what an earlier `make run` finished (evaluate --force plays its games again).
run: install
	$(BIN)/python -m drmario pipeline --profile ci --run-dir runs/demo
	$(BIN)/python -m drmario evaluate --agents greedy,expert,policy@small,net-mcts-32@small \
		--levels "[10, 15, 20]" --games-per-level 10 --top-level-games 10 --out runs/demo/shipped-arena.csv

# Remake the committed sample data/round0-sample (round-0 examples of 10 expert games; tests check it is current).
data: install
	$(BIN)/python -c "from drmario.run.pipeline import make_sample_data; make_sample_data('data')"

# Benchmarks (figures printed and written to bench/results/); bench/gpu.py is meant for a GPU machine.
bench: install
	for b in engine data net search; do $(BIN)/python bench/$$b.py || exit 1; done

# The README's pictures (docs/) from a finished run that bench/rounds.py has evaluated: make figures RUN=runs/cpu
RUN ?= runs/cpu
figures: install
	$(BIN)/python docs/figures.py $(RUN)

# An executed 03 exported to HTML and opened in headless Chromium offline (needs chromium, e.g.
# apt-get install chromium): every widget's cell shows its pictures, every progress bar its last line.
offline-check: install
	$(BIN)/python bench/offline_export.py $(RUN)/notebooks/03_analysis.ipynb

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis
