# Two commands matter: `make demo` and `make test`. Both build on `make install`.
SHELL := /bin/bash
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
LAB_DIR ?= .rotate-lab
export NO_COLOR ?=

.PHONY: install bytecode demo test lint typecheck bench bench-rotation clean lab-down bugsink

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
	@command -v kubectl >/dev/null 2>&1 || echo "note: kubectl not found; the kubectl fidelity tests will be skipped"
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]' -e ./lab
	@touch $(BIN)/rotate

install: $(BIN)/rotate

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

# bugsink: tests/e2e/test_bugsink.py runs the real Bugsink from its own venv
test: install bytecode bugsink
	$(BIN)/ruff check rotate lab tests bench
	$(BIN)/mypy
	$(BIN)/lint-imports --no-logo
	$(BIN)/pytest -q

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
	rm -rf $(VENV) $(LAB_DIR) .pytest_cache .mypy_cache .ruff_cache build dist *.egg-info lab/*.egg-info lab/build
