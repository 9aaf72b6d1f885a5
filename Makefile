# loadsched — every entry point the README and CI use.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# what `make e2e` runs: a file or a test of tests/e2e narrows it (make e2e E2E=tests/e2e/test_version_smoke.py)
E2E ?= tests/e2e

.PHONY: demo demo-picture docs reference results-page test unit unit-packages e2e setup fresh-check lint bench bench-quality bench-reliability serve image clean matrix

## demo: a local cluster where pods visibly avoid loaded nodes (plain vs loadsched, table + out/demo.html)
demo: setup
	$(BIN)/python -m sandbox.demo

## demo-picture: run the demo and copy its chart to docs/assets/demo.svg (the README's picture)
demo-picture: setup
	$(BIN)/python -m sandbox.demo --out out/demo-picture
	mkdir -p docs/assets && cp out/demo-picture/demo.svg docs/assets/demo.svg

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,docs,dispatch]'
	@touch $(STAMP)

## test: lint, the docs site, unit tests, then the end-to-end tests on a real control plane (sets up everything)
test: lint docs unit e2e

## docs: the docs site from docs/ into out/site, readable offline (mkdocs-material; --strict: warnings and broken links fail)
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict
	scripts/docs-offline.sh out/site

## reference: docs/reference from the code (flags, metrics, annotations, policy schema, chart values, OpenAPI); --check in tests/test_reference.py
reference: $(STAMP)
	$(BIN)/python scripts/reference.py

## results-page: docs/results.md from the benches' latest results (out/results/*.json)
results-page: $(STAMP)
	$(BIN)/python scripts/results_page.py

## unit: the tests that need no cluster (installs the Debian packages they run)
unit: $(STAMP) unit-packages
	$(BIN)/pytest -m "not e2e"

## unit-packages: the Debian packages the unit tests run (prometheus, for promtool), when missing
unit-packages:
	scripts/install-packages.sh unit

## e2e: the end-to-end tests (etcd, kube-apiserver, kube-scheduler, kube-controller-manager, Prometheus); E2E= narrows them
e2e: setup
	$(BIN)/pytest -m e2e $(E2E)

## matrix: per supported Kubernetes release (sandbox/build.py MATRIX_VERSIONS): build, capture + contract, e2e smoke
matrix: setup
	$(BIN)/python scripts/matrix.py

## setup: the sandbox's Debian packages (prometheus, postgresql, chromium), the Kubernetes, etcd, kwok and helm builds, when missing
setup: $(STAMP)
	PYTHON=$(BIN)/python scripts/setup-sandbox.sh

## fresh-check: make unit and an e2e smoke in a clean Debian container from a fresh clone of HEAD (as root; podman)
fresh-check:
	scripts/fresh-check.sh

## lint: ruff, ruff format, mypy strict (the code, scripts, the unit and end-to-end tests), import-linter contracts
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/mypy scripts
	$(BIN)/mypy tests
	$(BIN)/lint-imports

## bench: benchmarks under bench/
bench: setup
	$(BIN)/python -m bench.extender
	$(BIN)/python -m bench.scheduling
	$(BIN)/python -m bench.quota
	$(BIN)/python -m bench.dispatch

## bench-quality: five strategies through three seeded workload traces, judged by medians (about 85 minutes)
bench-quality: setup
	$(BIN)/python -m bench.quality --rounds 3

## bench-reliability: faults, Prometheus faults, generated bad input, memory
bench-reliability: setup
	$(BIN)/python -m bench.faults
	$(BIN)/python -m bench.prometheus_faults
	$(BIN)/python -m bench.schema_fuzz
	$(BIN)/python -m bench.memory

## image: the container image with podman (the Debian base it needs built once; see docs/install.md)
image:
	PYTHON=$(BIN)/python scripts/build-image.sh

## serve: the extender on 127.0.0.1:8888 with crane's default policy
serve: $(STAMP)
	$(BIN)/loadsched-extender --host 127.0.0.1 --port 8888

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis
