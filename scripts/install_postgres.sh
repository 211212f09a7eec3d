#!/usr/bin/env bash
# Installs the PostgreSQL server from Debian's packages, for tests/deploy/test_postgres_cluster.py.
# Idempotent: does nothing when initdb and pg_ctl are already there (on PATH or in Debian's
# /usr/lib/postgresql/<version>/bin, which is not on PATH). Needs root (or sudo) only to install.
# The test starts its own server in a temporary directory; the Debian cluster that the package may
# create on port 5432 is neither used nor needed.
set -euo pipefail

find_pg_bin() {
    local name=$1
    if command -v "$name" >/dev/null 2>&1; then
        command -v "$name"
        return 0
    fi
    local candidate
    for candidate in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
        if [ -x "$candidate/$name" ]; then
            echo "$candidate/$name"
            return 0
        fi
    done
    return 1
}

if find_pg_bin initdb >/dev/null && find_pg_bin pg_ctl >/dev/null; then
    echo "postgresql: already installed ($(find_pg_bin initdb))"
    exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
    SUDO=""
elif command -v sudo >/dev/null 2>&1; then
    SUDO="sudo"
else
    echo "install_postgres.sh: initdb/pg_ctl are missing and installing them needs root" >&2
    exit 1
fi

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update
$SUDO apt-get install -y --no-install-recommends postgresql

if ! find_pg_bin initdb >/dev/null || ! find_pg_bin pg_ctl >/dev/null; then
    echo "install_postgres.sh: postgresql installed but initdb/pg_ctl still not found" >&2
    exit 1
fi
echo "postgresql: installed ($(find_pg_bin initdb))"
