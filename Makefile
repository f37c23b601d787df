# The two commands a new user needs:
#   make serve   set up a virtual environment and run `ticklock serve` on the embedded SQLite store
#   make test    set up the same environment, install the test servers (Redis, FerretDB, Pushgateway),
#                and run the whole suite: ruff, lint-imports (the layering), mypy, cfn-lint + `sam build`,
#                pytest (the tests start and stop the servers)
#
# Two environments: .venv has ticklock with the product plug-in (plugins/parts), as it is deployed;
# .venv-engine has ticklock alone, and the engine's suite, type check and layering run there, which is
# what shows that the engine needs no plug-in. The plug-in's own suite runs in .venv.
PYTHON  ?= python3.11
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
ENGINE  := .venv-engine/bin
ESTAMP  := .venv-engine/.installed
PIP     := pip install --quiet --disable-pip-version-check -c constraints.txt

.PHONY: serve test services lint typecheck sam-check e2e-aws bench screenshots clean

$(STAMP): pyproject.toml constraints.txt plugins/parts/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/$(PIP) -e '.[dev]' -e plugins/parts
	touch $(STAMP)

$(ESTAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv .venv-engine
	$(ENGINE)/$(PIP) -e '.[dev]'
	touch $(ESTAMP)

serve: $(STAMP)
	$(BIN)/ticklock serve

lint: $(STAMP) $(ESTAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(ENGINE)/lint-imports
	PYTHONPATH=plugins/hello $(BIN)/lint-imports plugins/importlinter.ini

typecheck: $(STAMP) $(ESTAMP)
	$(ENGINE)/mypy
	MYPYPATH=plugins/parts:plugins/hello $(BIN)/mypy plugins/parts plugins/hello

services:
	scripts/services.sh

# cfn-lint and `sam build` of the AWS deployment (the SAM CLI in its own venv, no Docker)
sam-check:
	scripts/sam-check.sh

# template.yaml built and deployed into MiniStack, and checked through the deployed stack's own endpoints
# (tests/deployed; also part of `make test`, inside the engine's suite)
e2e-aws: $(ESTAMP) services sam-check
	$(ENGINE)/pytest tests/deployed

# The engine's suite first proves its environment has no plug-in but ticklock's own (builtin), then runs.
test: services lint typecheck sam-check
	$(ENGINE)/python scripts/engine-alone.py
	$(ENGINE)/pytest tests
	$(BIN)/pytest plugins

# the bench's extra (SQLAlchemy, for APScheduler's SQLite job store beside ticklock) goes into .venv only here
BSTAMP := $(VENV)/.bench-installed
$(BSTAMP): $(STAMP)
	$(BIN)/$(PIP) -e '.[dev,bench]' -e plugins/parts
	touch $(BSTAMP)

# ticklock as it was at an earlier commit, from this repository's history into its own environment, once
# per machine (the directory's name is the commit): make bench runs two such trees beside today's
BEFORES := $(HOME)/.cache/ticklock
$(BEFORES)/ticklock-%/.installed:
	@git cat-file -e '$*^{commit}' 2>/dev/null || { echo "make bench: commit $* is not in this clone's history (a shallow clone? git fetch --unshallow)" >&2; exit 1; }
	rm -rf '$(@D)' && mkdir -p '$(@D)'
	git archive --output='$(@D)/source.tar' $* && tar -xf '$(@D)/source.tar' -C '$(@D)'
	$(PYTHON) -m venv '$(@D)/.venv'
	cd '$(@D)' && .venv/bin/$(PIP) '.[dev]'
	touch '$@'

# when issue 15's targets were set (its "today's 191" fires/s on FerretDB): on both FerretDBs beside today's,
# so that "twice as many fires/s" is read on one server in one run
BEFORE_NAME := 845f68c
BEFORE_DIR  := $(BEFORES)/ticklock-$(BEFORE_NAME)
# when issue 47 began (the fire path before it was rewritten): on the rows of the performance band
BEFORE47_NAME := b0a426d
BEFORE47_DIR  := $(BEFORES)/ticklock-$(BEFORE47_NAME)

# issue 15's table: the fire workloads beside APScheduler, the REST API's creates, and the tick loop into SQS;
# (a), (b), (g) and the creates again with the engine's threads wherever the OS runs them (TICKLOCK_CPUS=any,
# the default before the engine kept to one CPU)
bench: $(BSTAMP) $(BEFORE_DIR)/.installed $(BEFORE47_DIR)/.installed services
	$(BIN)/python bench/band.py --before '$(BEFORE47_DIR)' --label "$(BEFORE47_NAME), issue 47's start" --rounds 2 --only a,b,c,e,f,g,n
	$(BIN)/python bench/fires.py --with-apscheduler
	$(BIN)/python bench/fires.py --only m,n --command '$(BEFORE_DIR)/.venv/bin/ticklock' --label "$(BEFORE_NAME), before issue 15"
	$(BIN)/python bench/api.py --clients 1,16,64
	$(BIN)/python bench/tick.py --rate 3000 --seconds 30
	$(BIN)/python bench/fire_path.py
	$(BIN)/python bench/dashboard_reads.py

# The README's screenshots of the dashboard (docs/screenshots), taken by its browser test in Chromium
screenshots: $(STAMP) services
	TICKLOCK_SCREENSHOTS=docs/screenshots $(BIN)/pytest tests/e2e/test_dashboard.py -k every_page -q -p no:cacheprovider

clean:
	rm -rf $(VENV) .venv-engine .pytest_cache .mypy_cache .ruff_cache
