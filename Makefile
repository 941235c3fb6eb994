# The two commands of the README: `make demo` (set up .venv if absent, run the main job) and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: venv demo dev dg-dev screenshot test test-cluster test-reliability lint format schema clean

$(BIN)/drill-dagster: pyproject.toml
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

venv: $(BIN)/drill-dagster

demo: venv
	$(BIN)/drill-dagster validate examples/plans
	$(BIN)/python examples/demo.py

# The Dagster UI on this machine only (127.0.0.1); HOST=0.0.0.0 make dev to share it.
HOST ?= 127.0.0.1
PORT ?= 3000
dev: venv
	$(BIN)/dagster dev -w workspace.yaml -h $(HOST) -p $(PORT)

# The same plans as a components project (examples/components), through dg (the dev extra).
dg-dev: venv
	cd examples/components && ../../$(BIN)/dg dev -h $(HOST) -p $(PORT)

# docs/lineage.png, taken in headless Chromium (needs: apt-get install -y chromium)
screenshot: venv
	$(BIN)/pip install --quiet -e '.[dev,screenshot]'
	$(BIN)/python scripts/screenshot_lineage.py

test: venv
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	$(BIN)/pytest -q -m "not slow"

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
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis
