# Two entry points: `make demo` (a short live run you can watch) and `make test`.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# Three stamps: what the demo runs (the runtime dependencies), what the tests add (the dev extra), and what only
# the benchmarks measure against (the bench extra: Ray Tune, for bench/sweeps.py).
STAMP := $(VENV)/.installed
DEV_STAMP := $(VENV)/.installed-dev
BENCH_STAMP := $(VENV)/.installed-bench

.PHONY: install install-dev demo test lint bench bench-sweeps clean chromium promtool

$(STAMP): pyproject.toml constraints.txt
	@echo "== [1/4] $(VENV): a virtual environment"
	$(PY) -m venv $(VENV)
	@echo "== [2/4] pip itself, up to date"
	$(BIN)/pip install --upgrade pip
	@echo "== [3/4] torch, the CPU build pinned in constraints.txt (about 200 MB; a few minutes on a slow line)"
	$(BIN)/pip install -c constraints.txt torch==2.13.0
	@echo "== [4/4] this project and its runtime dependencies, editable"
	$(BIN)/pip install -c constraints.txt -e .
	touch $(STAMP)

$(DEV_STAMP): $(STAMP)
	@echo "== the test extras (pytest, playwright, transformers, tensorboard, …)"
	$(BIN)/pip install -c constraints.txt -e '.[dev]'
	@$(MAKE) -s chromium
	touch $(DEV_STAMP)

# apt-get as root, or through sudo without a password; empty where neither works (that part is then skipped).
# It waits for another install's dpkg lock instead of failing at once; its output goes to a log whose path is
# printed when it fails.
APT := $(shell [ "$$(id -u)" = 0 ] && echo apt-get || (sudo -n true 2>/dev/null && echo "sudo -n apt-get"))
APT_GET := $(subst apt-get,env DEBIAN_FRONTEND=noninteractive apt-get,$(APT)) -o DPkg::Lock::Timeout=300 -y -q
APT_LOG_DIR := $(VENV)

# The web page's tests run in the system's chromium (Playwright drives it; it downloads no browser).
chromium:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	  if [ -z "$(APT)" ] || ! command -v apt-get >/dev/null 2>&1; then \
	    echo "chromium: not installed and apt-get cannot run here (apt-get install chromium, as root): the web" \
	         "page's browser tests will be skipped"; \
	  else \
	    mkdir -p $(APT_LOG_DIR); log=$(APT_LOG_DIR)/apt-chromium.log; echo "== chromium, with apt-get (its output: $$log)"; \
	    { $(APT_GET) install chromium || { $(APT_GET) update && $(APT_GET) install chromium; }; } >$$log 2>&1 || \
	    { tail -n 5 $$log; echo "chromium could not be installed: apt-get's output is in $$log; the web page's" \
	           "browser tests will be skipped"; }; \
	  fi

install: $(STAMP)

install-dev: $(DEV_STAMP)

demo: $(STAMP)
	$(BIN)/python scripts/demo.py

# Two workers (pytest-xdist; -n auto gives one per core): the end-to-end tests are two groups, each run one
# test at a time on one worker (`heavy` and `heavy-long`, tests/conftest.py), the light tests shared; a count
# of the tests run at each line's end, and the 15 slowest tests at the end.
TEST_WORKERS ?= 2

# The static gate: ruff (rules E, F, I, B, UP) and mypy over the five packages (settings in pyproject.toml).
lint: $(DEV_STAMP)
	$(BIN)/ruff check
	$(BIN)/mypy

test: $(DEV_STAMP) promtool lint
	$(BIN)/python -m pytest -p no:cacheprovider -n $(TEST_WORKERS) --dist loadgroup -o console_output_style=count \
		--durations=15

# promtool (Debian's prometheus package) checks the server's /metrics in the suite; where apt-get cannot
# run (not root, no apt), that one test is skipped and says why.
promtool:
	@command -v promtool >/dev/null || [ -z "$(APT)" ] || ! command -v apt-get >/dev/null || { \
	  mkdir -p $(APT_LOG_DIR); log=$(APT_LOG_DIR)/apt-promtool.log; echo "== promtool (Debian's prometheus), with apt-get (its output: $$log)"; \
	  { $(APT_GET) install --no-install-recommends prometheus || \
	    { $(APT_GET) update && $(APT_GET) install --no-install-recommends prometheus; }; } >$$log 2>&1 || \
	  { tail -n 5 $$log; echo "promtool: the prometheus package could not be installed: apt-get's output is in" \
	         "$$log; its test will be skipped"; }; }

$(BENCH_STAMP): $(DEV_STAMP)
	@echo "== the benchmarks' anchors (Ray Tune)"
	$(BIN)/pip install -c constraints.txt -e '.[dev,bench]'
	touch $(BENCH_STAMP)

bench: $(BENCH_STAMP)
	for f in bench/*.py; do case $$f in */sweeps_*.py) continue;; esac; echo "== $$f"; $(BIN)/python $$f || exit 1; done

# Nissa's PBT against Ray Tune's and random search (README, "Measured against Ray Tune's PBT").
bench-sweeps: $(BENCH_STAMP)
	$(BIN)/python bench/sweeps.py

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
