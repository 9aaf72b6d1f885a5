# loadsched — every entry point the README and CI use.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test unit lint bench serve clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

## test: lint, then the whole test suite (creates .venv from nothing)
test: lint unit

## unit: the test suite without lint
unit: $(STAMP)
	$(BIN)/pytest

## lint: ruff, ruff format, mypy strict, import-linter contracts
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

## bench: benchmarks under bench/
bench: $(STAMP)
	$(BIN)/python bench/extender.py

## serve: the extender on 127.0.0.1:8888 with crane's default policy
serve: $(STAMP)
	$(BIN)/loadsched-extender --host 127.0.0.1 --port 8888

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis
