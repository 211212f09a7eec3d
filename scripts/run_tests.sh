#!/usr/bin/env bash
# Runs pytest from the project venv. Exit code 5 (no test collected) is a failure here: a suite that
# silently runs nothing must not look green.
set -uo pipefail
cd "$(dirname "$0")/.."
.venv/bin/python -m pytest "$@"
rc=$?
if [ $rc -eq 5 ]; then
  echo "run_tests: pytest collected no tests (exit 5); treating as a failure" >&2
  exit 1
fi
exit $rc
