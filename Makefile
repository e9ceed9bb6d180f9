# The README's two commands: `make run` and `make test`. Both build .venv from scratch on a
# fresh machine, so nothing installed by hand is needed (the spark extra too: pyspark + pyarrow
# for tests/spark; Java 17 must be on the machine).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-dev-spark

.PHONY: run test lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev,spark]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/mqstandalone

# pytest exits 5 when it collected nothing; that must fail, never pass silently.
test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/python -m pytest; rc=$$?; \
	  if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing"; exit 1; fi; exit $$rc

lint: $(STAMP)
	$(BIN)/ruff check .

clean:
	rm -rf $(VENV) .pytest_cache
