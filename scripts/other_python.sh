#!/usr/bin/env bash
# Tests again on another Python than the project's venv (3.11), in a venv of its own, for
# what changes between versions (asyncio's timeouts did in 3.12):
#
#     bash scripts/other_python.sh 3.13 tests/test_waits.py -n 2
#
# The interpreter is `python3.13` on the PATH, else pyenv's newest 3.13. A machine that has
# neither says so and runs nothing (exit 0): the main suite does not depend on it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
version="$1"
shift

found() { "$1" -c 'import sys; print(sys.executable)' 2>/dev/null; }
python="$(found "python$version" || true)"
if [[ -z "$python" ]] && command -v pyenv >/dev/null; then
    installed="$(pyenv versions --bare | grep -E "^${version//./\\.}(\.[0-9]+)?$" | sort -V | tail -1 || true)"
    [[ -n "$installed" ]] && python="$(found "$(pyenv prefix "$installed")/bin/python$version" || true)"
fi
if [[ -z "$python" ]]; then
    echo "NOT RUN: no Python $version on this machine (neither python$version nor pyenv's)" >&2
    exit 0
fi

venv=".venv-$version"
[[ -x "$venv/bin/python" ]] || "$python" -m venv "$venv"
if [[ ! "$venv/.installed" -nt pyproject.toml ]]; then
    "$venv/bin/python" -m pip -q --disable-pip-version-check install -e '.[dev]'
    touch "$venv/.installed"
fi
echo "Python $("$venv/bin/python" -c 'import platform; print(platform.python_version())'):"
"$venv/bin/python" -m pytest "$@"
