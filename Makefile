# Two entry points: `make demo` (a short live run you can watch) and `make test`.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install demo test bench clean chromium promtool

$(STAMP): pyproject.toml constraints.txt
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -c constraints.txt torch==2.13.0
	$(BIN)/pip install -q -c constraints.txt -e '.[dev,bench]'
	@$(MAKE) -s chromium
	touch $(STAMP)

# The web page's tests run in the system's chromium (Playwright drives it; it downloads no browser).
chromium:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	  (command -v apt-get >/dev/null 2>&1 && { apt-get install -y -qq chromium >/dev/null 2>&1 || \
	    { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq chromium >/dev/null 2>&1; }; }) || \
	  echo "chromium could not be installed (apt-get install chromium, as root): the web page's browser tests will be skipped"

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/python scripts/demo.py

test: $(STAMP) promtool
	$(BIN)/python -m pytest -q -p no:cacheprovider

# promtool (Debian's prometheus package) checks the server's /metrics in the suite; where apt-get cannot
# run (not root, no apt), that one test is skipped and says why.
APT := $(shell [ "$$(id -u)" = 0 ] && echo apt-get || (sudo -n true 2>/dev/null && echo "sudo -n apt-get"))
promtool:
	@command -v promtool >/dev/null || [ -z "$(APT)" ] || ! command -v apt-get >/dev/null || \
		DEBIAN_FRONTEND=noninteractive $(APT) install -y -q --no-install-recommends prometheus >/dev/null || \
		( DEBIAN_FRONTEND=noninteractive $(APT) update -q >/dev/null && \
		  DEBIAN_FRONTEND=noninteractive $(APT) install -y -q --no-install-recommends prometheus >/dev/null ) || \
		echo "promtool: prometheus package not installed; its test will be skipped"

bench: $(STAMP)
	for f in bench/*.py; do echo "== $$f"; $(BIN)/python $$f || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
