# Source me (bash): the environment of this repository's Airflow, used by `make airflow`, the demo run
# of the pipeline DAG and the tests.
#
#   source scripts/airflow_env.sh
#
# State (SQLite database, logs, generated admin password) lives in $SPARK_JOBS_VAR/airflow, i.e. the
# repository's var/airflow unless SPARK_JOBS_VAR says otherwise: never ~/airflow. The DAGs' data lives
# under $SPARK_JOBS_VAR too. The Spark jobs run on the Airflow connection `spark_pipeline`, which
# scripts/define_spark_connection.py adds from SPARK_MASTER (default local[*]) when a state has none;
# edit it in Admin > Connections or set AIRFLOW_CONN_SPARK_PIPELINE. The UI listens on 127.0.0.1:8080; AIRFLOW__API__HOST and
# AIRFLOW__API__PORT change that.

_spark_jobs_repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

export SPARK_JOBS_VAR="${SPARK_JOBS_VAR:-$_spark_jobs_repo/var}"
export AIRFLOW_HOME="$SPARK_JOBS_VAR/airflow"
export AIRFLOW__CORE__DAGS_FOLDER="$_spark_jobs_repo/dags"
export AIRFLOW__CORE__PLUGINS_FOLDER="$_spark_jobs_repo/plugins"
export AIRFLOW__CORE__LOAD_EXAMPLES=False
export AIRFLOW__API__HOST="${AIRFLOW__API__HOST:-127.0.0.1}"
export AIRFLOW__API__PORT="${AIRFLOW__API__PORT:-8080}"
# Tasks reach the API server (the execution API) through this URL, so it must follow the port.
if [ "$AIRFLOW__API__HOST" = "0.0.0.0" ]; then
  export AIRFLOW__API__BASE_URL="http://127.0.0.1:$AIRFLOW__API__PORT"
else
  export AIRFLOW__API__BASE_URL="http://$AIRFLOW__API__HOST:$AIRFLOW__API__PORT"
fi

# The DAGs and the Spark jobs import spark_jobs from this checkout, with this venv's Python.
case ":${PYTHONPATH:-}:" in
  *":$_spark_jobs_repo:"*) ;;
  *) export PYTHONPATH="$_spark_jobs_repo${PYTHONPATH:+:$PYTHONPATH}" ;;
esac
case ":$PATH:" in
  *":$_spark_jobs_repo/.venv/bin:"*) ;;
  *) export PATH="$_spark_jobs_repo/.venv/bin:$PATH" ;;
esac
export PYSPARK_PYTHON="${PYSPARK_PYTHON:-$_spark_jobs_repo/.venv/bin/python}"
export PYSPARK_DRIVER_PYTHON="${PYSPARK_DRIVER_PYTHON:-$PYSPARK_PYTHON}"
# No SPARK_LOCAL_IP here: a task sets it (loopback) only when its connection's master is local, so a
# connection edited to a cluster does not inherit a driver bound to 127.0.0.1.

mkdir -p "$AIRFLOW_HOME"
unset _spark_jobs_repo
