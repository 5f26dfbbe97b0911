# Every task a person or CI runs. `make demo` and `make test` set up .venv when missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: demo clean-demo test lint typecheck imports unit bench clean named chromium soak

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

# The main job: declare a small static site (examples/files/) and converge it into
# demo-output/site with the embedded SQLite store at demo-output/state.db.
DEMO := $(BIN)/reconcile --db demo-output/state.db --root demo-output/site

demo: $(STAMP)
	mkdir -p demo-output
	$(DEMO) apply -f examples/files/
	$(DEMO) run --once --timeout 120

clean-demo:
	rm -rf demo-output

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(STAMP)
	$(BIN)/mypy

imports: $(STAMP)
	$(BIN)/lint-imports

# BIND9 for the dns provider's tests (they start their own named on a free port).
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
named:
	@command -v named >/dev/null || test -x /usr/sbin/named || \
		(DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y --no-install-recommends bind9 bind9-dnsutils)

# Debian's chromium for the web view's browser tests (Playwright drives it; no browser download).
chromium:
	@test -x /usr/bin/chromium || \
		(DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y --no-install-recommends chromium || \
		 (DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get update && \
		  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y --no-install-recommends chromium))

unit: $(STAMP) named chromium
	$(BIN)/pytest --cov --cov-report=term:skip-covered

test: lint typecheck imports unit

# The gap-free watch on PostgreSQL at full size: 8 writer processes, 4 watchers, 100,000
# events, in a fresh schema of SOAK_DB (dropped afterwards); exit 1 on any skipped,
# repeated or reordered event.
SOAK_DB ?= postgresql://postgres@127.0.0.1:5432/postgres
soak: $(STAMP)
	$(BIN)/python benchmarks/watch_gaps.py --db $(SOAK_DB) --events 100000 --writers 8 --watchers 4 \
		--json benchmarks/results/watch_gaps.json

bench: $(STAMP)
	$(BIN)/python benchmarks/store.py --json benchmarks/results/store.json
	$(BIN)/python benchmarks/reconcile.py --size 100000 --json benchmarks/results/reconcile.json
	$(BIN)/python benchmarks/files.py --json benchmarks/results/files.json
	$(BIN)/python benchmarks/operators.py --json benchmarks/results/operators.json
	$(BIN)/python benchmarks/growth.py --json benchmarks/results/growth.json
	$(BIN)/python benchmarks/s3.py --json benchmarks/results/s3.json
	$(BIN)/python benchmarks/dns.py --json benchmarks/results/dns.json
	$(BIN)/python benchmarks/startup.py --json benchmarks/results/startup.json
	$(BIN)/python benchmarks/http_api.py --json benchmarks/results/http.json
	$(BIN)/python benchmarks/report.py benchmarks/results/store.json benchmarks/results/reconcile.json \
		benchmarks/results/files.json benchmarks/results/growth.json benchmarks/results/s3.json \
		benchmarks/results/dns.json benchmarks/results/startup.json benchmarks/results/http.json \
		--out benchmarks/results/report.html

clean:
	rm -rf $(VENV) demo-output .pytest_cache .mypy_cache .ruff_cache .coverage

# Renew the web view's screenshots the docs show (docs/how-to/img/ui-*.png), taken by
# the browser tests.
screenshots: $(STAMP) chromium
	RECONCILE_SCREENSHOTS=$(CURDIR)/docs/how-to/img $(BIN)/pytest -q tests/test_ui_browser.py
