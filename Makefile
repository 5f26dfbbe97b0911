# Every task a person or CI runs. `make demo` and `make test` set up .venv when missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: demo test lint typecheck imports unit bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python examples/demo.py --db demo-output/state.db

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

imports: $(STAMP)
	$(BIN)/lint-imports

unit: $(STAMP)
	$(BIN)/pytest --cov --cov-report=term:skip-covered

test: lint typecheck imports unit

bench: $(STAMP)
	$(BIN)/python benchmarks/store.py --json benchmarks/results/store.json

clean:
	rm -rf $(VENV) demo-output .pytest_cache .mypy_cache .ruff_cache .coverage
