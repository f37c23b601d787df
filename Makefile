# The two commands a new user needs:
#   make serve   set up a virtual environment and run `ticklock serve` on the embedded SQLite store
#   make test    set up the same environment, install the test servers (Redis, FerretDB, Pushgateway),
#                and run the whole suite: ruff, lint-imports (the layering), mypy, cfn-lint + `sam build`,
#                pytest (the tests start and stop the servers)
PYTHON ?= python3.11
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: serve test services lint typecheck sam-check bench clean

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[dev]'
	touch $(STAMP)

serve: $(STAMP)
	$(BIN)/ticklock serve

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy

services:
	scripts/services.sh

# cfn-lint and `sam build` of the AWS deployment (the SAM CLI in its own venv, no Docker)
sam-check:
	scripts/sam-check.sh

test: services lint typecheck sam-check
	$(BIN)/pytest

bench: $(STAMP) services
	$(BIN)/python bench/fires.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
