# The two commands of the README: `make demo` (set up .venv if absent, run the main job) and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: venv demo dev dg-dev ui-deps screenshot test test-cluster test-ui test-reliability lint format schema clean \
	tpch-data test-tpch-spark

$(BIN)/drill-dagster: pyproject.toml
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

# Bytecode of the project's own sources (an editable install compiles none), so each new process
# (a Dagster run worker, a CLI call) does not compile them again, even where PYTHONDONTWRITEBYTECODE
# is set; fast when up to date.
venv: $(BIN)/drill-dagster
	$(BIN)/python -m compileall -q engine drill_dagster

demo: venv
	$(BIN)/drill-dagster validate examples/plans
	$(BIN)/python examples/demo.py

# The Dagster UI on this machine only (127.0.0.1); HOST=0.0.0.0 make dev to share it. Its runs
# connect to a warm Spark Connect server started (and stopped) with it: DEV_ARGS=--no-warm-spark
# to have each run start its own Spark instead.
HOST ?= 127.0.0.1
PORT ?= 3000
DEV_ARGS ?=
dev: venv
	$(BIN)/python scripts/dev.py -w workspace.yaml -h $(HOST) -p $(PORT) $(DEV_ARGS)

# The same plans as a components project (examples/components), through dg (the dev extra).
dg-dev: venv
	cd examples/components && ../../$(BIN)/dg dev -h $(HOST) -p $(PORT)

# playwright (no browser download) drives Debian's chromium: apt-get install -y chromium
ui-deps: venv
	$(BIN)/python -c "import playwright" 2>/dev/null || $(BIN)/pip install --quiet -e '.[dev,ui]'
	test -x /usr/bin/chromium || { echo "no /usr/bin/chromium: apt-get install -y chromium"; exit 1; }

# The browser test: make dev's stack on a free port, materialize, fail, re-execute from failure.
test-ui: ui-deps
	$(BIN)/pytest -q -m ui tests/ui

# The browser test, saving its screenshots as the README's docs/lineage.png, run.png, asset.png
screenshot: ui-deps
	DRILL_UI_SCREENSHOTS=$(CURDIR)/docs $(BIN)/pytest -q -m ui tests/ui

test: venv tpch-data
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	$(BIN)/pytest -q -m "not slow and not ui and not tpch_spark"

# TPC-H data, queries and answers at TPCH_SF (default 0.01) in .tpch/, from DuckDB's tpch extension
# in its own virtualenv (the extension loads from its package file: nothing is downloaded at run).
TPCH_SF ?= 0.01
TPCH_VENV := .venv-tpch
$(TPCH_VENV)/installed:
	test -d $(TPCH_VENV) || $(PYTHON) -m venv $(TPCH_VENV)
	$(TPCH_VENV)/bin/pip install --quiet duckdb==1.5.5 duckdb-extension-tpch==1.5.5
	touch $@

tpch-data: $(TPCH_VENV)/installed
	$(TPCH_VENV)/bin/python scripts/tpch_data.py --sf $(TPCH_SF) --out .tpch

# The 22 TPC-H queries on Spark (CI runs it; make test runs them on the local executor).
test-tpch-spark: venv tpch-data
	$(BIN)/pytest -q -m tpch_spark tests/tpch

# Spark Connect and a standalone master, started from the installed pyspark (~2 min; CI runs it).
test-cluster: venv
	$(BIN)/pytest -q -m slow tests/cluster

test-reliability: venv
	$(BIN)/pytest -q -m slow

lint: venv
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	$(BIN)/ruff format --check .

format: venv
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

schema: venv
	$(BIN)/python -m engine.plan.schema > plan.schema.json

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis $(TPCH_VENV) .tpch
