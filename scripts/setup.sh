#!/usr/bin/env bash
# Shared, idempotent set-up for `make demo` and `make test`.
#   scripts/setup.sh            Python environment (.venv) with the pinned requirements
#   scripts/setup.sh --system   also the Debian packages the end-to-end tests use (Chromium, PostgreSQL)
# A second run skips everything already done (a stamp records the hash of what was installed).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3.11}
VENV=.venv
STAMP="$VENV/.setup-stamp"
want_system=0
[ "${1:-}" = "--system" ] && want_system=1

say() { printf '[setup] %s\n' "$*"; }
die() { printf '[setup] ERROR: %s\n' "$*" >&2; exit 1; }

check_java() {
  command -v java >/dev/null 2>&1 || die "Java 17 or newer is required by Spark and was not found.
  Install it, e.g. on Debian/Ubuntu: sudo apt-get install -y openjdk-17-jre-headless
  (or set JAVA_HOME and put \$JAVA_HOME/bin on PATH)."
  local version major
  version=$(java -version 2>&1 | awk -F'"' '/version/ {print $2; exit}')
  major=${version%%.*}
  [ "$major" = "1" ] && major=$(echo "$version" | cut -d. -f2)
  [ "${major:-0}" -ge 17 ] 2>/dev/null || die "Java $version found, Spark 4 needs Java 17 or newer.
  Install it, e.g. sudo apt-get install -y openjdk-17-jre-headless, and put it first on PATH."
}

check_python() {
  command -v "$PYTHON" >/dev/null 2>&1 || PYTHON=python3
  "$PYTHON" -c 'import sys; sys.exit(sys.version_info[:2] < (3, 11))' \
    || die "Python 3.11 or newer is required ($PYTHON is $("$PYTHON" -V 2>&1))."
}

install_python_env() {
  local digest
  digest=$(cat requirements.txt requirements-dev.txt constraints.txt scripts/setup.sh | sha256sum | cut -c1-16)
  if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$digest" ] && "$VENV/bin/python" scripts/check_pyspark.py >/dev/null 2>&1; then
    say "Python environment up to date ($VENV)"
    return
  fi
  [ -x "$VENV/bin/python" ] || { say "creating $VENV"; "$PYTHON" -m venv "$VENV"; }
  say "installing pinned requirements into $VENV (first run: a few minutes)"
  "$VENV/bin/python" -m pip install --quiet --upgrade pip
  "$VENV/bin/python" -m pip install --quiet -r requirements-dev.txt -c constraints.txt
  # pyspark-client (a dependency of the Spark provider) overwrites files of pyspark: put pyspark back.
  "$VENV/bin/python" -m pip install --quiet --force-reinstall --no-deps "$(grep -E '^pyspark==' requirements.txt)"
  "$VENV/bin/python" scripts/check_pyspark.py
  echo "$digest" > "$STAMP"
}

install_system_packages() {
  local missing=()
  [ -x /usr/bin/chromium ] || missing+=(chromium)
  command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing+=(postgresql)
  if [ ${#missing[@]} -eq 0 ]; then
    say "system packages present (chromium, postgresql)"
    return
  fi
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  say "installing Debian packages: ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

install_compose_cli() {
  # `docker compose config` parses the deployment's compose file in tests; no engine is needed.
  docker compose version >/dev/null 2>&1 && return
  PYTHON="$VENV/bin/python" scripts/install_compose_cli.sh
}

check_python
check_java
install_python_env
"$VENV/bin/python" scripts/prefer_installed_pyspark.py >/dev/null
if [ $want_system -eq 1 ]; then
  install_system_packages
  install_compose_cli
fi
say "ready"
