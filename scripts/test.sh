#!/usr/bin/env bash
# The whole check: lint, strict typing, then every test (unit, corpus, live servers).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
export PATH="/usr/sbin:/sbin:$PATH"
.venv/bin/ruff check replicator tests benchmarks
.venv/bin/ruff format --check replicator tests benchmarks
.venv/bin/mypy
# two workers (pytest-xdist), a test file each at a time: most of the suite waits on servers
# and subprocesses; REPLICATOR_TEST_WORKERS=0 runs it in this process
exec .venv/bin/pytest -q -ra -n "${REPLICATOR_TEST_WORKERS:-2}" --dist loadfile "$@"
