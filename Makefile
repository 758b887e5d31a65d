# Developer tasks: venv, demo, lint, docs, test (against throwaway PostgreSQL, PgBouncer and
# MariaDB servers), test-fast (SQLite only), bench, clean.
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c

PY := .venv/bin/python
PIP := $(PY) -m pip -q --disable-pip-version-check
PATHS := src tests examples benchmarks scripts
# Two pytest workers share the suite (much of it waits on child processes and servers);
# PYTEST_ARGS="tests/test_x.py" replaces them, e.g. to run one file in one process.
PYTEST_ARGS ?= -n 2 --dist worksteal
# Run again on the newest Python supported (asyncio's timeouts changed in 3.12): the tests of
# waits, cancellation, concurrency and lifetime.
OTHER_PYTHON ?= 3.13
OTHER_PYTHON_TESTS := -n 2 --dist worksteal tests/test_waits.py tests/test_concurrency.py \
	tests/test_lifetime.py tests/test_fair_lock.py tests/test_idempotency.py
BENCH_ARGS ?=

# Start PostgreSQL, always stop it on exit (the recipe keeps the failing command's status).
WITH_PG = trap 'bash scripts/pg.sh stop' EXIT; \
	bash scripts/pg.sh start; \
	export AGENTS_SQLALCHEMY_PG_URL="$$(cat .pgtmp/url)";

# PostgreSQL (with fsync off, and another with it on) and MariaDB, for the benchmark; all
# stopped on exit.
WITH_BENCH_SERVERS = trap 'bash scripts/mariadb.sh stop; bash scripts/pg.sh stop; \
	PG_DIR="$(CURDIR)/.pgtmp-fsync" bash scripts/pg.sh stop' EXIT; \
	bash scripts/pg.sh start; \
	export AGENTS_SQLALCHEMY_PG_URL="$$(cat .pgtmp/url)"; \
	PG_DIR="$(CURDIR)/.pgtmp-fsync" PG_FSYNC=on bash scripts/pg.sh start; \
	export AGENTS_SQLALCHEMY_PG_FSYNC_URL="$$(cat .pgtmp-fsync/url)"; \
	bash scripts/mariadb.sh start; \
	export AGENTS_SQLALCHEMY_MARIADB_URL="$$(cat .mariadbtmp/url)";

# PostgreSQL, PgBouncer in front of it, and MariaDB; all stopped on exit, whatever happens.
WITH_SERVERS = trap 'bash scripts/pgbouncer.sh stop; bash scripts/mariadb.sh stop; \
	bash scripts/pg.sh stop' EXIT; \
	bash scripts/pg.sh start; \
	export AGENTS_SQLALCHEMY_PG_URL="$$(cat .pgtmp/url)"; \
	bash scripts/pgbouncer.sh start; \
	export AGENTS_SQLALCHEMY_PGBOUNCER_URL="$$(cat .pgbouncertmp/url)"; \
	bash scripts/mariadb.sh start; \
	export AGENTS_SQLALCHEMY_MARIADB_URL="$$(cat .mariadbtmp/url)";

.PHONY: venv demo ui-demo ui-screenshots lint docs test test-fast bench bench-docs bench-scale clean

venv: .venv/.installed

.venv/.installed: pyproject.toml
	test -x $(PY) || python3 -m venv .venv
	$(PIP) install -e '.[dev]'
	touch $@

demo: venv
	$(PY) examples/quickstart.py

# The session browser over a demo database (several users, tool calls, branches, usage):
# http://127.0.0.1:8300/ until Ctrl+C.
ui-demo: venv
	$(PY) examples/ui_demo.py ui-demo.db

# The docs' screenshots of the session browser, taken by its browser test on SQLite.
ui-screenshots: venv
	bash scripts/browser.sh
	AGENTS_SQLALCHEMY_UI_DOCS=docs/images $(PY) -m pytest tests/test_ui_browser.py -k sqlite -q

lint: venv
	.venv/bin/ruff check $(PATHS)
	.venv/bin/ruff format --check $(PATHS)
	.venv/bin/mypy

# The documentation site into site/, strictly: a broken link, anchor or reference fails.
docs: venv
	NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict --quiet

# Every server is required: a test that cannot reach one fails, it is never skipped; the
# browser tests need Debian's chromium, which scripts/browser.sh installs when missing.
test: venv lint docs
	bash scripts/browser.sh
	$(WITH_SERVERS) export AGENTS_SQLALCHEMY_REQUIRE_PG=1 AGENTS_SQLALCHEMY_REQUIRE_MARIADB=1 \
		AGENTS_SQLALCHEMY_REQUIRE_PGBOUNCER=1; \
	$(PY) -m pytest $(PYTEST_ARGS); \
	if [[ -n "$(OTHER_PYTHON)" ]]; then bash scripts/other_python.sh $(OTHER_PYTHON) $(OTHER_PYTHON_TESTS); fi

# The quick tier: SQLite only, no lint, no server, nothing marked slow (child interpreters,
# embedding models, passphrase-heavy and racing tests, the SDK's own suite, the wheel).
test-fast: venv
	$(PY) -m pytest -m "not servers and not slow" $(PYTEST_ARGS)

bench: venv
	$(WITH_BENCH_SERVERS) $(PY) benchmarks/bench.py $(BENCH_ARGS)

# The pages the docs include: the full run with search (15 rounds of the short calls: their
# ratios move less from run to run than the quick run's 6), the event loop's lag beside a
# 200,000-item session, the memory of a 1,000,000-item one (about 30 minutes in all).
bench-docs: venv
	$(WITH_BENCH_SERVERS) $(PY) benchmarks/bench.py --search --markdown docs/benchmarks/results.md; \
	$(PY) -m benchmarks.loop_lag --markdown docs/benchmarks/loop-lag.md; \
	$(PY) -m benchmarks.million --markdown docs/benchmarks/million.md

# 1,000,000 sessions and 10,000,000 items on PostgreSQL (2-4 min and 5 GB of disk);
# BENCH_ARGS="--sessions 10000 --items 100000" for a one-minute run. Not part of `make test`.
bench-scale: venv
	$(WITH_PG) $(PY) benchmarks/bench_scale.py $(BENCH_ARGS)

clean:
	-bash scripts/pgbouncer.sh stop
	-bash scripts/mariadb.sh stop
	-bash scripts/pg.sh stop
	rm -rf .venv .venv-* site .pgtmp .pgbouncertmp .mariadbtmp .cache .mypy_cache .ruff_cache .pytest_cache
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
