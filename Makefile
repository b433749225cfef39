# Two entry points: `make demo` (a short live run you can watch) and `make test`.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install demo test bench clean

$(STAMP): pyproject.toml constraints.txt
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -c constraints.txt torch==2.13.0
	$(BIN)/pip install -q -c constraints.txt -e '.[dev,bench]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/python scripts/demo.py

# Two workers (pytest-xdist; -n auto gives one per core): the end-to-end tests run one at a time on one
# of them (the `heavy` group, tests/conftest.py) while the other takes the rest; a count of the tests
# run at each line's end, and the 15 slowest tests at the end.
TEST_WORKERS ?= 2

test: $(STAMP)
	$(BIN)/python -m pytest -p no:cacheprovider -n $(TEST_WORKERS) --dist loadgroup -o console_output_style=count \
		--durations=15

bench: $(STAMP)
	for f in bench/*.py; do echo "== $$f"; $(BIN)/python $$f || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
