# pinlab: two commands on a fresh machine.
#   make demo  - create .venv, install pinlab, run the six debate scenarios (pinlab run)
#   make test  - create .venv, install pinlab[dev], run ruff, mypy, import-linter and pytest

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.pinlab-installed

.PHONY: demo test lint typecheck layers pytest bench clean

# setup.py compiles the flow solver (pinlab.sim.native), so an edit of flows.py reinstalls too
# (otherwise pinlab would use the pure-Python flows.py, with a warning, until a rebuild)
$(STAMP): pyproject.toml setup.py src/pinlab/sim/flows.py
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

demo: $(STAMP)
	$(BIN)/pinlab run --out pinlab-out

test: lint typecheck layers pytest

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

typecheck: $(STAMP)
	$(BIN)/mypy

layers: $(STAMP)
	$(BIN)/lint-imports

# one worker per core (tests/conftest.py: what a worker does before it reports); worksteal, so
# that the long uapi fuzz does not hold back the tests queued behind it
pytest: $(STAMP)
	$(BIN)/pytest -n auto --dist worksteal

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_alloc.py
	$(BIN)/python benchmarks/bench_sim.py
	$(BIN)/python benchmarks/bench_flows.py --vs-simgrid
	$(BIN)/python benchmarks/bench_sweep.py
	$(BIN)/python benchmarks/bench_report.py

clean:
	rm -rf $(VENV) build pinlab-out src/*.egg-info src/pinlab/sim/_ext src/pinlab/sim/*.so .mypy_cache .ruff_cache .pytest_cache .hypothesis
