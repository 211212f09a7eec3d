"""Add the pipelines' Spark connection to Airflow's metadata database unless it exists already.

    python scripts/define_spark_connection.py            # host = $SPARK_MASTER, or local[*]

`make demo`, `make airflow` and the Docker stack's init run this after migrating the database. A connection
of that name that exists (added in the UI, by `airflow connections`, or by an earlier run) is kept as it
is: edit it there, or set AIRFLOW_CONN_SPARK_PIPELINE, which wins over the database.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    plugins = os.environ.get("AIRFLOW__CORE__PLUGINS_FOLDER") or str(REPO_ROOT / "plugins")
    sys.path.insert(0, plugins)
    from pipeline_airflow.spark import DEFAULT_MASTER, SPARK_CONN_ID, connection_for_master

    master = os.environ.get("SPARK_MASTER") or DEFAULT_MASTER
    with tempfile.TemporaryDirectory() as folder:
        definition = Path(folder) / "connections.json"
        definition.write_text(json.dumps({SPARK_CONN_ID: connection_for_master(master)}))
        # `import` without --overwrite skips a connection that exists and says so.
        done = subprocess.run(
            ["airflow", "connections", "import", str(definition)], text=True, capture_output=True
        )
    if done.returncode != 0:
        print(done.stdout + done.stderr, file=sys.stderr)
        return done.returncode
    if "already exists" in done.stdout:
        print(
            f"Spark connection {SPARK_CONN_ID}: exists already, kept as it is "
            "(SPARK_MASTER only seeds a new one: edit it in Admin > Connections)"
        )
    else:
        print(f"Spark connection {SPARK_CONN_ID}: added with master {master}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
