#!/usr/bin/env bash
# The native core's tests under AddressSanitizer and UndefinedBehaviorSanitizer. The extension
# is built from setup.py's own definition with -fsanitize=address,undefined into a throwaway
# copy of the package and its tests (the tree's build is left alone), and the tests that drive
# the C paths run against that copy. Any sanitizer report fails the run. CI runs it (.ci/run);
# docs/development.md says how to run it by hand. Arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap.sh
root=$PWD
py=$root/.venv/bin/python

work=$(mktemp -d "${TMPDIR:-/tmp}/replicator-sanitize.XXXXXX")
trap 'rm -rf "$work"' EXIT
tar -cf - --exclude=__pycache__ --exclude='*.so' replicator tests setup.py | tar -xf - -C "$work"

SANITIZE=(-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -O1 -g)
echo "sanitize: building the native core with ${SANITIZE[*]}" >&2
# setup.py's Extension (sources, warnings), with the sanitizers' flags last so that their -O1
# wins, and not optional: a build that fails here fails the run
(cd "$work" && "$py" - "${SANITIZE[@]}" <<'EOF'
import sys

import setuptools

flags = sys.argv[1:]
found = {}
build = setuptools.setup
setuptools.setup = lambda **kwargs: found.update(kwargs)
exec(compile(open("setup.py", encoding="utf-8").read(), "setup.py", "exec"))
setuptools.setup = build
(ext,) = found["ext_modules"]
ext.extra_compile_args = [*ext.extra_compile_args, *flags]
ext.extra_link_args = [*ext.extra_link_args, *flags]
ext.optional = False
build(ext_modules=[ext], script_args=["-q", "build_ext", "--inplace"])
EOF
)
# pytest's settings; copied after the build, which reads only setup.py
cp pyproject.toml "$work/"
# the corpus of real binlog files, found from the tree (the copy is elsewhere)
REPLICATOR_CORPUS_DIR=$("$py" -c 'from tests.corpus.util import corpus_root; print(corpus_root())')
export REPLICATOR_CORPUS_DIR
export REPLICATOR_REQUIRE_NATIVE=1
# CI's Hypothesis profile here too (as scripts/test.sh): its examples, and no health check on
# the speed of generating them, which the sanitizers slow down many times over
export HYPOTHESIS_PROFILE="${HYPOTHESIS_PROFILE:-ci}"
export PYTHONPATH=$work
cd "$work"

# Python is not built with the sanitizers: their runtime is loaded first, Python's allocator is
# plain malloc (so that ASan sees every object's bounds), and leaks are not reported (Python
# keeps objects alive until exit by design). ASan writes its reports to files (subprocesses'
# too); UBSan writes to the process's stderr, which pytest leaves alone with --capture=sys, so
# that a report is seen even when it stops the process.
reports=$work/reports
mkdir "$reports"
asan=$(gcc -print-file-name=libasan.so)
[ -f "$asan" ] || { echo "sanitize: gcc has no libasan.so (Debian: libgcc-12-dev)" >&2; exit 1; }
export LD_PRELOAD=$asan
export PYTHONMALLOC=malloc
export ASAN_OPTIONS=detect_leaks=0:log_path=$reports/asan
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1

"$py" -c 'import sys
from replicator.binlog import _rowcore, native
assert native.available() and _rowcore.__file__.startswith(sys.argv[1]), _rowcore.__file__' "$work"
log=$work/pytest.log
status=0
"$py" -m pytest -p no:xdist -p no:cacheprovider -q --capture=sys \
    tests/unit/test_native.py \
    tests/unit/test_native_arrow.py \
    tests/unit/test_block_decoding.py \
    tests/unit/test_block_landing.py \
    tests/unit/test_stream.py \
    tests/unit/test_skip_row_transactions.py \
    tests/unit/test_runs.py \
    tests/corpus/test_runs.py \
    tests/unit/test_snapshot_units.py \
    tests/unit/test_snapshot_binary.py \
    tests/unit/test_snapshot_bytes.py \
    tests/corpus/test_compiled_rows.py \
    "$@" 2>&1 | tee "$log" || status=$?
# every report fails the run, also one from a subprocess whose failure a test expected
if [ -n "$(ls -A "$reports")" ] || grep -qE 'ERROR: AddressSanitizer|runtime error:' "$log"; then
    cat "$reports"/* >&2 2>/dev/null || true
    echo "sanitize: the sanitizers reported (see above)" >&2
    exit 1
fi
exit "$status"
