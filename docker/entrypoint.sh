#!/usr/bin/env bash
# Entry point of the spark-jobs image (docker/Dockerfile).
#
# SPARK_LOCAL_IP=auto  becomes this container's address on the compose network, so that Spark drivers
#                      (in Airflow tasks) and workers advertise an address the other containers can reach
#                      (the project's session code otherwise binds the driver to 127.0.0.1).
# spark-class ...      runs a Spark daemon (master, worker) directly, without Airflow's database checks.
# anything else        goes to the Airflow image's own entry point (/entrypoint): `api-server`,
#                      `scheduler`, `bash -c ...`, ...
set -euo pipefail

if [[ "${SPARK_LOCAL_IP:-}" == "auto" ]]; then
    SPARK_LOCAL_IP="$(python -c 'import socket; print(socket.gethostbyname(socket.gethostname()))')"
    export SPARK_LOCAL_IP
fi

if [[ "${1:-}" == "spark-class" ]]; then
    exec "$@"
fi
exec /entrypoint "$@"
