#!/usr/bin/env bash
# The whole check: lint, strict typing, then every test (unit, corpus, live servers).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
export PATH="/usr/sbin:/sbin:$PATH"
.venv/bin/ruff check replicator tests benchmarks
.venv/bin/ruff format --check replicator tests benchmarks
.venv/bin/mypy
exec .venv/bin/pytest -q -ra "$@"
