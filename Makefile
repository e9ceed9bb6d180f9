# The README's two commands: `make run` and `make test`. Both build .venv from scratch on a
# fresh machine, so nothing installed by hand is needed. `run` installs only the daemons' own
# dependencies; `test` adds the dev tools, the spark extra (pyspark + pyarrow for tests/spark;
# Java 17 must be on the machine), the dashboard extra, and Debian's chromium for its browser tests.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
BASE   := $(VENV)/.installed-base
FULL   := $(VENV)/.installed-dev-spark
# ali-ons for tests/interop, from the committed lock file; npm writes this file on every install.
NODE_DIR  := tests/interop/node
NODE_DEPS := $(NODE_DIR)/node_modules/.package-lock.json

.PHONY: run test test-unit test-mypyc lint typecheck bench clean interop-deps browser-deps

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(BASE): pyproject.toml setup.py | $(BIN)/python
	$(BIN)/python -m pip install -q -e .
	touch $(BASE)

$(FULL): pyproject.toml setup.py | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[dev,spark,dashboard]'
	touch $(FULL) $(BASE)

# The mypyc build (setup.py, ROCKETMQ_PY_MYPYC=1) in a venv of its own, installed as its wheel is:
# an editable install would put the extensions beside the sources, where .venv would load them too.
# The dependencies come first, with mypy, so that the compiling install needs no isolated build
# environment (--no-build-isolation); it is redone whenever a file of the package changes.
MYPYC_VENV := .venv-mypyc
MYPYC      := $(MYPYC_VENV)/.installed-mypyc
PACKAGE_DIRS  := $(shell $(PYTHON) -c 'import tomllib; \
  print(*tomllib.load(open("pyproject.toml", "rb"))["tool"]["setuptools"]["package-dir"].values())')
PACKAGE_FILES := $(shell find $(PACKAGE_DIRS) -type f -not -path '*/__pycache__/*')

$(MYPYC): pyproject.toml setup.py $(PACKAGE_FILES)
	test -x $(MYPYC_VENV)/bin/python || $(PYTHON) -m venv $(MYPYC_VENV)
	$(MYPYC_VENV)/bin/python -m pip install -q --upgrade pip 'setuptools>=77'
	$(MYPYC_VENV)/bin/python -m pip install -q '.[dev,spark,dashboard]'
	rm -rf build/mypyc  # no extension of a module since taken off the list
	ROCKETMQ_PY_MYPYC=1 $(MYPYC_VENV)/bin/python -m pip install -q --no-build-isolation --no-deps \
	  --force-reinstall .
	touch $(MYPYC)

# tests/integration/test_dashboard.py drives Debian's chromium through chromium-driver (one
# version, from one archive). Installed as root when missing; present, this does nothing.
browser-deps:
	@if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver || \
	  { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver; }; \
	else echo "chromium and chromium-driver not found: as root, apt-get install chromium chromium-driver"; exit 1; fi

# Node.js and npm must be on the machine (CI's are): the interop suite drives ali-ons, and a
# machine without them fails here rather than skipping it.
$(NODE_DEPS): $(NODE_DIR)/package.json $(NODE_DIR)/package-lock.json
	@command -v npm >/dev/null 2>&1 || { echo "npm not found: tests/interop needs Node.js (>= 16) and npm"; exit 1; }
	cd $(NODE_DIR) && npm ci --no-audit --no-fund
	touch $@

interop-deps: $(NODE_DEPS)

# make run ARGS="--port 0 --broker-port 0": free ports where 9876/10911 are taken
run: $(BASE)
	$(BIN)/mqstandalone $(ARGS)

# pytest exits 5 when it collected nothing; that must fail, never pass silently. The whole suite
# runs on the pure package, then test-mypyc's part of it on the compiled build.
test: $(FULL) $(MYPYC) $(NODE_DEPS) browser-deps
	$(BIN)/ruff check .
	$(BIN)/python .ci/typecheck.py
	$(BIN)/python -m pytest; rc=$$?; \
	  if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing"; exit 1; fi; exit $$rc
	$(MAKE) --no-print-directory test-mypyc

# The mypyc build's tests: tests/unit, and the integration tests of what the compiled modules carry
# (the wire, sends and pulls through broker and SDK, hostile input, TLS) with the daemons compiled
# too. tests/unit/test_mypyc_build.py fails the run if the compiled modules are not the ones loaded.
MYPYC_TESTS := tests/unit tests/integration/test_broker.py tests/integration/test_producer.py \
  tests/integration/test_push_consumer.py tests/integration/test_lite_pull.py \
  tests/integration/test_remoting_server.py tests/integration/test_remoting_bad_input.py \
  tests/integration/test_hostile_requests.py tests/integration/test_tls.py tests/integration/test_namesrv.py

test-mypyc: $(MYPYC)
	ROCKETMQ_PY_MYPYC=1 $(MYPYC_VENV)/bin/python -m pytest -q $(MYPYC_TESTS); rc=$$?; \
	  if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing"; exit 1; fi; exit $$rc

# The fast suite while editing: tests/unit only (no sockets, no daemons, no Spark, no Node.js).
test-unit: $(FULL)
	$(BIN)/ruff check .
	$(BIN)/python .ci/typecheck.py
	$(BIN)/python -m pytest tests/unit -q; rc=$$?; \
	  if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing"; exit 1; fi; exit $$rc

lint: $(FULL)
	$(BIN)/ruff check .

# mypy, strict for rocketmq_py and checked for tests (pyproject's [tool.mypy]), over build/mypy:
# the package laid out as installed, since the editable install's import hook is closed to mypy.
typecheck: $(FULL)
	$(BIN)/python .ci/typecheck.py

clean:
	rm -rf $(VENV) $(MYPYC_VENV) .pytest_cache .mypy_cache build/mypy $(NODE_DIR)/node_modules
