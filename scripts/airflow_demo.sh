#!/usr/bin/env bash
# Runs the pipeline DAG once, without a scheduler, as `make demo` does:
#
#   scripts/airflow_demo.sh [LOGICAL_DATE]
#   PIPELINE_CONF='{"window_size": 300000}' scripts/airflow_demo.sh   (DAG params, as the trigger form sets them)
#
# 1. migrates the metadata database in var/airflow (scripts/airflow_env.sh) and adds the Spark connection
#    `spark_pipeline` (from SPARK_MASTER, default local[*]) unless it exists;
# 2. generates sensor events into the DAG's input folder if it holds none yet;
# 3. `airflow dags test sensor_alerts_pipeline`: the Spark job (on the connection's master) for the latest complete aligned interval (or LOGICAL_DATE's), its validation, its report.
# Exits non-zero when the DAG run fails (a failed data-quality suite fails it).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/airflow_env.sh"

say() { printf '[airflow-demo] %s\n' "$*"; }

say "metadata database: $AIRFLOW_HOME"
airflow db migrate > "$AIRFLOW_HOME/db-migrate.log" 2>&1 \
  || { cat "$AIRFLOW_HOME/db-migrate.log" >&2; exit 1; }
python "$(dirname "${BASH_SOURCE[0]}")/define_spark_connection.py"   # from SPARK_MASTER, unless it exists

# The folders the DAG uses, from the DAG's own settings (pipeline_airflow.paths).
mapfile -t paths < <(PYTHONPATH="$AIRFLOW__CORE__PLUGINS_FOLDER:$PYTHONPATH" python -c '
from pipeline_airflow.paths import JobPaths
p = JobPaths.for_job("sensor_alerts")
print(p.input, p.output, p.reports, sep="\n")')
input_dir=${paths[0]} output_dir=${paths[1]} reports_dir=${paths[2]}

if ! compgen -G "$input_dir/events-*" >/dev/null; then
  # Readings that end two minutes before the latest aligned boundary, and a run for that boundary: the
  # run's wall clock is then "now" for the data, so only the sensors that really stopped are silent.
  say "generating sensor events (with some late and bad records) into $input_dir"
  logical_date=$(python - "$input_dir" <<'PY'
import datetime as dt, json, os, shutil, subprocess, sys, time
from spark_jobs.streams.timeutil import previous_aligned
target = sys.argv[1]
minute = 60_000
interval = int(os.environ.get("SENSOR_ALERTS_INTERVAL_MINUTES", "10")) * minute
shift = int(os.environ.get("SENSOR_ALERTS_SHIFT_MINUTES", "2")) * minute
generate = [sys.executable, "-m", "spark_jobs.jobs.generate_events", "--output", target, "--bad-fraction", "0.002"]
facts = json.loads(subprocess.run(generate, check=True, capture_output=True, text=True).stdout)
boundary = previous_aligned(int(time.time() * 1000), interval, shift)
start_ms = boundary - 2 * minute - (facts["last_event_ms"] - facts["first_event_ms"])
iso = lambda ms: dt.datetime.fromtimestamp(ms / 1000, dt.UTC).isoformat()
shutil.rmtree(target)
subprocess.run([*generate, "--start", iso(start_ms)], check=True, stdout=subprocess.DEVNULL)
print(iso(boundary))
PY
)
  [ $# -gt 0 ] || set -- "$logical_date"
fi

say "running sensor_alerts_pipeline once (airflow dags test $*${PIPELINE_CONF:+ with params $PIPELINE_CONF})"
airflow dags test ${PIPELINE_CONF:+--conf "$PIPELINE_CONF"} sensor_alerts_pipeline "$@"

python -m spark_jobs.jobs.demo --show "$output_dir"
say "outputs:   $output_dir"
say "Data Docs: $reports_dir/data_docs/index.html"
say "Airflow UI on this state: make airflow"
