#!/usr/bin/env bash
# `make airflow`: Airflow (`airflow standalone`: api-server, scheduler, dag-processor, triggerer; SQLite,
# LocalExecutor) on this repository's dags/ and plugins/, with its state in var/airflow
# (scripts/airflow_env.sh). Once the UI answers, prints its URL and the admin password. Ctrl-C stops it.
#
# AIRFLOW__API__PORT=8081 scripts/airflow_standalone.sh     another port
# SPARK_MASTER=spark://host:7077 scripts/airflow_standalone.sh   a new state's Spark connection on a cluster
#   (an existing connection `spark_pipeline` is kept: edit it in Admin > Connections)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/airflow_env.sh"

command -v airflow >/dev/null 2>&1 || { echo "airflow is not installed in .venv: run 'make setup'" >&2; exit 1; }
if python - "$AIRFLOW__API__HOST" "$AIRFLOW__API__PORT" <<'PY'
import socket, sys
host, port = sys.argv[1], int(sys.argv[2])
with socket.socket() as s:
    sys.exit(0 if s.connect_ex(("127.0.0.1" if host == "0.0.0.0" else host, port)) == 0 else 1)
PY
then
  echo "Port $AIRFLOW__API__PORT is already in use: stop what listens there or set AIRFLOW__API__PORT" >&2
  exit 1
fi

# The Spark connection lives in the metadata database like any other (editable in the UI): add it once.
airflow db migrate > "$AIRFLOW_HOME/db-migrate.log" 2>&1 \
  || { cat "$AIRFLOW_HOME/db-migrate.log" >&2; exit 1; }
python "$(dirname "${BASH_SOURCE[0]}")/define_spark_connection.py"

# Standalone prints a generated password only the first time; this prints it every time, from the file.
password_file="${AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE:-$AIRFLOW_HOME/simple_auth_manager_passwords.json.generated}"

announce_when_ready() {
  local url="$AIRFLOW__API__BASE_URL"
  for _ in $(seq 1 600); do
    if python - "$url/api/v2/monitor/health" <<'PY' 2>/dev/null
import sys, urllib.request
urllib.request.urlopen(sys.argv[1], timeout=2)
PY
    then
      local password
      password=$(python - "$password_file" <<'PY' 2>/dev/null || echo "(see $password_file)"
import json, sys
print(json.load(open(sys.argv[1]))["admin"])
PY
)
      printf '\n==============================================================\n'
      printf ' Airflow UI: %s\n user:       admin\n password:   %s\n' "$url" "$password"
      printf ' DAGs:       %s\n state:      %s\n' "$AIRFLOW__CORE__DAGS_FOLDER" "$AIRFLOW_HOME"
      printf '==============================================================\n\n'
      return 0
    fi
    sleep 1
  done
  echo "Airflow did not answer at $url within 10 minutes" >&2
}

announce_when_ready &
announcer=$!

# Standalone stops its components on SIGINT. A shell that starts this script in the background makes
# it ignore SIGINT, which Python then never turns into KeyboardInterrupt: restore the handler, so that
# `kill -INT` of standalone works however this script was started. `kill` (TERM) of this script is
# passed on as SIGINT; Ctrl-C reaches standalone directly, from the terminal.
python -c 'import signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)
from airflow.__main__ import main
sys.argv = ["airflow", "standalone"]
main()' &
standalone=$!
trap 'kill "$announcer" 2>/dev/null || true' EXIT
trap 'kill -INT "$standalone" 2>/dev/null || true' TERM
trap ':' INT
status=0
while kill -0 "$standalone" 2>/dev/null; do
  wait "$standalone" && status=0 || status=$?
done
exit "$status"
