# Two commands matter: `make demo` and `make test`. Both build on `make install`.
SHELL := /bin/bash
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
LAB_DIR ?= .rotate-lab
export NO_COLOR ?=

.PHONY: install bytecode demo test test-floors lint typecheck bench bench-rotation clean lab-down bugsink

$(BIN)/rotate: pyproject.toml lab/pyproject.toml
	@command -v redis-server >/dev/null 2>&1 || { \
	  echo "redis-server is missing: installing it with apt-get (it plays Dragonfly in the lab)"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  ($$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq redis-server >/dev/null) || { \
	    echo "error: could not install redis-server with apt-get; install it by hand (Debian/Ubuntu: apt-get install redis-server) and run make again" >&2; exit 1; }; }
	@ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || { \
	  echo "postgresql is missing: installing it with apt-get (the lab's database)"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  ($$SUDO apt-get update -qq && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null) || { \
	    echo "error: could not install postgresql with apt-get; install it by hand (Debian/Ubuntu: apt-get install postgresql) and run make again" >&2; exit 1; }; }
	@{ command -v prometheus-pushgateway >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1; } || { \
	  echo "prometheus-pushgateway or promtool is missing: installing them with apt-get (the metrics and alert-rule tests)"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  ($$SUDO apt-get update -qq && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus-pushgateway prometheus >/dev/null) || \
	    echo "note: could not install prometheus-pushgateway/prometheus with apt-get; the Pushgateway and alert-rule tests will be skipped"; }
	@command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ] || { \
	  echo "mariadb-server is missing: installing it with apt-get (the MariaDB plug-in's tests)"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  ($$SUDO apt-get update -qq && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mariadb-server >/dev/null) || { \
	    echo "error: could not install mariadb-server with apt-get; install it by hand (Debian/Ubuntu: apt-get install mariadb-server) and run make again" >&2; exit 1; }; }
	@command -v kubectl >/dev/null 2>&1 || echo "note: kubectl not found; the kubectl fidelity tests will be skipped"
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[all,dev]' -e ./lab
	@touch $(BIN)/rotate

# The example plug-in (examples/provider-mariadb), installed the way a user would: not
# editable, into the product's venv, so `apply: mariadb` comes only from its entry point.
MARIADB_PLUGIN := examples/provider-mariadb
$(VENV)/.provider-mariadb: $(BIN)/rotate $(MARIADB_PLUGIN)/pyproject.toml $(wildcard $(MARIADB_PLUGIN)/rotate_provider_mariadb/*.py)
	$(BIN)/pip install -q ./$(MARIADB_PLUGIN)
	@touch $@

install: $(BIN)/rotate $(VENV)/.provider-mariadb

# Bugsink for `rotate lab up --with bugsink` (docs/lab.md "Bugsink"), in a venv of its own:
# it pins python-dateutil==2.9.*, which rotate's kubernetes>=37 (dateutil>=3) cannot share.
BUGSINK_VENV := .venv-bugsink
$(BUGSINK_VENV)/bin/bugsink-manage:
	$(PY) -m venv $(BUGSINK_VENV)
	$(BUGSINK_VENV)/bin/pip install -q 'bugsink==2.6.*'

bugsink: install $(BUGSINK_VENV)/bin/bugsink-manage

# The bytecode an installed package has (pip writes it; an editable install does not): with
# PYTHONDONTWRITEBYTECODE set, every rotate and lab process would compile the sources again.
# Only what changed since the last time is compiled.
bytecode: install
	@$(BIN)/python -m compileall -q -j 0 rotate lab/rotate_lab bench

demo: install bytecode
	@bash examples/demo.sh "$(LAB_DIR)"

# bugsink: tests/e2e/test_bugsink.py runs the real Bugsink from its own venv.
# The suite runs on TEST_WORKERS pytest-xdist workers (two: the 2-core machine `make test`
# must finish on in 15 minutes), a whole test module per worker at a time (--dist loadfile),
# so a module's lab fixture still starts once; each worker's labs take their own address
# blocks (tests/conftest.py). TEST_WORKERS=0 runs it in one process, as plain `pytest -q`.
TEST_WORKERS ?= 2

test: install bytecode bugsink
	$(BIN)/ruff check rotate lab tests bench $(MARIADB_PLUGIN)
	$(BIN)/mypy
	$(BIN)/mypy --strict $(MARIADB_PLUGIN)/rotate_provider_mariadb
	$(BIN)/lint-imports --no-logo
	$(BIN)/pytest -q $(MARIADB_PLUGIN)/tests
	$(BIN)/pytest -q -n $(TEST_WORKERS) --dist loadfile

# `make test-floors`: the unit tests with every dependency at the floor pyproject.toml (and
# lab/pyproject.toml) declares, in a venv of its own (.ci/floors.py writes the pins), plus
# pytest and respx at theirs. Not import-linter: it needs a newer rich than rotate's floor
# (its contract test skips here; `make test` runs it). Rebuilt only when a pyproject changes.
FLOORS := .venv-floors

$(FLOORS)/installed: pyproject.toml lab/pyproject.toml .ci/floors.py
	rm -rf $(FLOORS)
	$(PY) -m venv $(FLOORS)
	$(PY) .ci/floors.py pyproject.toml lab/pyproject.toml > $(FLOORS)/constraints.txt
	$(FLOORS)/bin/pip install -q -c $(FLOORS)/constraints.txt -e '.[all]' -e ./lab \
	  pytest respx
	@touch $@

test-floors: $(FLOORS)/installed
	$(FLOORS)/bin/python -m pytest -q -p no:cacheprovider tests/unit

# `make bench` = start-up cost, the plan's latency against slow APIs (bench/plan_rtt.py), then
# the rotation benchmark (brings up its own realistic lab in bench/results/<time>/lab and
# stops it). BENCH_ARGS passes options, e.g.
# `make bench-rotation BENCH_ARGS="--runs 1 --strategy restart"`.
BENCH_ARGS ?=

bench: install
	@rc=0; $(BIN)/python bench/startup.py || rc=1; \
	  $(BIN)/python -m bench.plan_rtt || rc=1; \
	  $(BIN)/python -m bench.rotation $(BENCH_ARGS) || rc=1; exit $$rc

bench-rotation: install
	$(BIN)/python -m bench.rotation $(BENCH_ARGS)

lab-down:
	-$(BIN)/rotate lab down --dir "$(LAB_DIR)"

clean: lab-down
	rm -rf $(VENV) $(FLOORS) $(LAB_DIR) .pytest_cache .mypy_cache .ruff_cache build dist *.egg-info lab/*.egg-info lab/build
