# Developer tasks: venv, demo, lint, test and bench (against a throwaway PostgreSQL), clean.
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c

PY := .venv/bin/python
PIP := $(PY) -m pip -q --disable-pip-version-check
PATHS := src tests examples benchmarks
PYTEST_ARGS ?=
BENCH_ARGS ?=

# Start PostgreSQL, always stop it on exit (the recipe keeps the failing command's status).
WITH_PG = trap 'bash scripts/pg.sh stop' EXIT; \
	bash scripts/pg.sh start; \
	export AGENTS_SQLALCHEMY_PG_URL="$$(cat .pgtmp/url)";

.PHONY: venv demo lint test bench clean

venv: .venv/.installed

.venv/.installed: pyproject.toml
	test -x $(PY) || python3 -m venv .venv
	$(PIP) install -e '.[dev]'
	touch $@

demo: venv
	$(PY) examples/quickstart.py

lint: venv
	.venv/bin/ruff check $(PATHS)
	.venv/bin/ruff format --check $(PATHS)
	.venv/bin/mypy

test: venv lint
	$(WITH_PG) export AGENTS_SQLALCHEMY_REQUIRE_PG=1; \
	$(PY) -m pytest $(PYTEST_ARGS)

bench: venv
	$(WITH_PG) $(PY) benchmarks/bench.py $(BENCH_ARGS)

clean:
	-bash scripts/pg.sh stop
	rm -rf .venv .pgtmp .cache .mypy_cache .ruff_cache .pytest_cache
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
