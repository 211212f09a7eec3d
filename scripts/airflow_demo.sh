#!/usr/bin/env bash
# Runs the pipeline DAG once, without a scheduler, as `make demo` does:
#
#   scripts/airflow_demo.sh [LOGICAL_DATE]
#
# 1. migrates the metadata database in var/airflow (scripts/airflow_env.sh);
# 2. generates sensor events into the DAG's input folder if it holds none yet;
# 3. `airflow dags test sensor_alerts_pipeline`: the Spark job (local[*] unless SPARK_MASTER says
#    otherwise) for the latest complete aligned interval (or LOGICAL_DATE's), its validation, its report.
# Exits non-zero when the DAG run fails (a failed data-quality suite fails it).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/airflow_env.sh"

say() { printf '[airflow-demo] %s\n' "$*"; }

say "metadata database: $AIRFLOW_HOME"
airflow db migrate > "$AIRFLOW_HOME/db-migrate.log" 2>&1 \
  || { cat "$AIRFLOW_HOME/db-migrate.log" >&2; exit 1; }

# The folders the DAG uses, from the DAG's own settings (pipeline_airflow.paths).
mapfile -t paths < <(PYTHONPATH="$AIRFLOW__CORE__PLUGINS_FOLDER:$PYTHONPATH" python -c '
from pipeline_airflow.paths import JobPaths
p = JobPaths.for_job("sensor_alerts")
print(p.input, p.output, p.reports, sep="\n")')
input_dir=${paths[0]} output_dir=${paths[1]} reports_dir=${paths[2]}

if ! compgen -G "$input_dir/events-*" >/dev/null; then
  say "generating sensor events into $input_dir"
  python -m spark_jobs.jobs.generate_events --output "$input_dir"
fi

say "running sensor_alerts_pipeline once (airflow dags test)"
airflow dags test sensor_alerts_pipeline "$@"

say "outputs:   $output_dir"
say "Data Docs: $reports_dir/data_docs/index.html"
