#!/usr/bin/env bash
# The whole check: lint, strict typing, then every test (unit, corpus, live servers).
set -euo pipefail
cd "$(dirname "$0")/.."
# scripts/bootstrap.sh installs what the machine lacks (apt-get, then the venv). It runs in CI
# (.ci/run sets REPLICATOR_REQUIRE_LIVE=1), where there is no venv yet, and when the packaging
# or a C source of the native core is newer than the venv's install; REPLICATOR_BOOTSTRAP=1
# runs it always, =0 never.
stamp=$(ls .venv/.installed-* 2>/dev/null | head -n 1 || true)
bootstrap=${REPLICATOR_BOOTSTRAP:-}
if [ -z "$bootstrap" ]; then
    bootstrap=0
    if [ "${REPLICATOR_REQUIRE_LIVE:-}" = 1 ] || [ -n "${CI:-}" ] || [ -z "$stamp" ] \
        || [ ! -x .venv/bin/python ] \
        || [ -n "$(find pyproject.toml setup.py replicator/binlog -newer "$stamp" \
            \( -name pyproject.toml -o -name setup.py -o -name '*.[ch]' \) -print -quit)" ]; then
        bootstrap=1
    fi
fi
if [ "$bootstrap" = 1 ]; then
    scripts/bootstrap.sh
fi
export PATH="/usr/sbin:/sbin:$PATH"
scripts/check
# every property test runs as many examples as in CI (tests/hypothesis_budget.py)
export HYPOTHESIS_PROFILE="${HYPOTHESIS_PROFILE:-ci}"
# two workers (pytest-xdist), a test file each at a time: most of the suite waits on servers
# and subprocesses; REPLICATOR_TEST_WORKERS=0 runs it in this process
exec .venv/bin/pytest -q -ra -n "${REPLICATOR_TEST_WORKERS:-2}" --dist loadfile "$@"
