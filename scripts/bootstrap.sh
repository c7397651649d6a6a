#!/usr/bin/env bash
# Installs what a fresh machine lacks: Debian packages for the real servers the tests and the
# demo start (MariaDB, Mosquitto, Java for Spark), then a virtualenv with the project, and
# promtool (which checks deploy/prometheus/alerts.yml) into it.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ] || need+=(mariadb-server-core)
command -v mariadb-install-db >/dev/null 2>&1 || need+=(mariadb-server-core)
command -v my_print_defaults >/dev/null 2>&1 || need+=(mariadb-client-core)
command -v mariadb-binlog >/dev/null 2>&1 || need+=(mariadb-client)
command -v mosquitto >/dev/null 2>&1 || [ -x /usr/sbin/mosquitto ] || need+=(mosquitto)
command -v java >/dev/null 2>&1 || need+=(openjdk-17-jre-headless)
# the native core (replicator/binlog/_rowcore_c/): a C compiler and the Python headers
PY=${PYTHON:-python3}
command -v gcc >/dev/null 2>&1 || need+=(gcc)
"$PY" -c 'import os, sys, sysconfig
sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' \
    || need+=(python3-dev)
# validates docker-compose.yml in the tests (no Docker engine needed for that)
command -v docker-compose >/dev/null 2>&1 || docker compose version >/dev/null 2>&1 \
    || need+=(docker-compose)
if [ ${#need[@]} -gt 0 ]; then
    echo "bootstrap: installing ${need[*]}" >&2
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
        $(printf '%s\n' "${need[@]}" | sort -u) >/dev/null
fi

if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
# reinstalled (and the native core rebuilt) when the packaging or a C source or header changes
stamp=.venv/.installed-$(cat pyproject.toml setup.py replicator/binlog/_rowcore_c/*.[ch] | sha1sum | cut -c1-12)
if [ ! -f "$stamp" ]; then
    .venv/bin/pip install -q --upgrade pip >/dev/null
    .venv/bin/pip install -q -e '.[dev]'
    rm -f .venv/.installed-*
    touch "$stamp"
fi

# promtool, for tests/unit/test_monitoring.py: unpacked from Debian's prometheus package into
# .venv/bin, so that no Prometheus server is installed as a service or started
if ! command -v promtool >/dev/null 2>&1 && [ ! -x .venv/bin/promtool ]; then
    echo "bootstrap: unpacking promtool from the prometheus package" >&2
    tmp=$(mktemp -d)
    if ! (cd "$tmp" && apt-get download -qq prometheus >/dev/null 2>&1); then
        SUDO=""
        [ "$(id -u)" -eq 0 ] || SUDO="sudo"
        $SUDO apt-get update -qq
        (cd "$tmp" && apt-get download -qq prometheus >/dev/null)
    fi
    dpkg-deb -x "$tmp"/prometheus_*.deb "$tmp/unpacked"
    install -m 0755 "$tmp/unpacked/usr/bin/promtool" .venv/bin/promtool
    rm -rf "$tmp"
fi

# bytecode for the package, as an installed package has it: every daemon a test or benchmark
# starts would otherwise compile the sources again where PYTHONDONTWRITEBYTECODE is set
.venv/bin/python -m compileall -q replicator >/dev/null
