"""The deployment of docker/docker-compose.yaml, natively: Airflow on PostgreSQL submitting to a Spark cluster.

Same topology as the compose stack, without containers (no Docker engine here):
- PostgreSQL from Debian's packages, on a free loopback port in a tmp data dir;
- the stack's own init step, docker/airflow_init.py: secrets checked, admin password file written,
  `airflow db migrate` onto PostgreSQL;
- a standalone Spark master and two workers from the pyspark package (spark_jobs.spark.cluster);
- the Airflow services as separate processes: api-server (UI, REST and the execution API the tasks
  talk to), dag-processor and scheduler with the LocalExecutor (the triggerer is not started: this DAG
  defers nothing);
- the DAG run triggered through the REST API, as a user would, with the admin password from the init step.

Why a real scheduler run rather than `airflow dags test`: `dags test` runs the tasks inside its own
process, without the executor, the scheduler or the api-server, so it would not exercise the LocalExecutor,
the execution API, the JWT secret shared by api-server and scheduler, or the metadata database as the
components share it. The cost is a minute of start-up. `[scheduler] use_job_schedule = False` keeps the
scheduler from adding its own scheduled run (catchup=False would otherwise add one for the latest
interval), so the triggered run is the only one.

Passing means: the run succeeded in PostgreSQL's dag_run table, every task succeeded, the Spark master's
JSON state lists the job's application as finished on the cluster, the run's validation (in process)
wrote passing verdicts, the output topics hold rows, and the weekly full validation then runs as a Spark
application on the cluster and passes.
"""

from __future__ import annotations

import datetime as dt
import importlib.util
import json
import os
import secrets
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from spark_jobs.spark.cluster import StandaloneCluster
from tests.deploy.support import (
    PostgresServer,
    Service,
    free_port,
    http_get,
    http_status,
    start_service,
    wait_for,
)

pytestmark = [pytest.mark.slow, pytest.mark.airflow, pytest.mark.timeout(1200)]

REPO_ROOT = Path(__file__).resolve().parents[2]
DAG_ID = "sensor_alerts_pipeline"
VENV_BIN = Path(sys.executable).parent
RUN_TIMEOUT_S = 900


def airflow_env(tmp: Path, pg: PostgresServer, spark_master: str, api_port: int) -> dict[str, str]:
    """The environment every Airflow component gets: the compose file's x-airflow-common, natively."""
    from cryptography.fernet import Fernet

    keep = ("HOME", "LANG", "LC_ALL", "TMPDIR", "USER", "JAVA_HOME", "TZ")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env.update(
        {
            "PATH": f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}",
            "PYTHONPATH": str(REPO_ROOT),
            "AIRFLOW_HOME": str(tmp / "airflow-home"),
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": pg.sqlalchemy_url,
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__CORE__DAGS_FOLDER": str(REPO_ROOT / "dags"),
            "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO_ROOT / "plugins"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "True",
            "AIRFLOW__CORE__FERNET_KEY": Fernet.generate_key().decode(),
            "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_urlsafe(48),
            "AIRFLOW__API__SECRET_KEY": secrets.token_urlsafe(48),
            "AIRFLOW__API__HOST": "127.0.0.1",
            "AIRFLOW__API__PORT": str(api_port),
            "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{api_port}",
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{api_port}/execution/",
            "AIRFLOW__CORE__AUTH_MANAGER": "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(tmp / "auth" / "passwords.json"),
            "AIRFLOW__SCHEDULER__ENABLE_HEALTH_CHECK": "True",
            "AIRFLOW__SCHEDULER__SCHEDULER_HEALTH_CHECK_SERVER_PORT": str(free_port()),
            "AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE": "False",
            # Other engineers' Airflow may hold the default log-server port on this machine.
            "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "10",
            # Two shared cores: give parsing room.
            "AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT": "120",
            "AIRFLOW__DAG_PROCESSOR__DAG_FILE_PROCESSOR_TIMEOUT": "180",
            "AIRFLOW__CORE__PARALLELISM": "4",
            # Where the Spark jobs run and where their data lives (the compose file's values, natively).
            "SPARK_MASTER": spark_master,
            "SPARK_LOCAL_IP": "127.0.0.1",
            "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
            "SPARK_JOBS_VAR": str(tmp / "var"),
        }
    )
    return env


class Api:
    """The api-server's REST API with the admin's bearer token."""

    def __init__(self, base: str, token: str | None = None):
        self.base, self.token = base, token

    def request(self, method: str, path: str, body: dict | None = None) -> dict:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(f"{self.base}{path}", data=data, method=method)
        req.add_header("Content-Type", "application/json")
        if self.token:
            req.add_header("Authorization", f"Bearer {self.token}")
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.loads(resp.read() or b"{}")


def generate_events(env: dict[str, str], input_dir: Path, log_dir: Path) -> None:
    """The Spark engineer's generator writes the job's input folder."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "spark_jobs.jobs.generate_events",
            "--output",
            str(input_dir),
            # Small: the test is about where things run, not how much; a few files, a few thousand rows.
            "--events",
            "4000",
            "--sensors",
            "20",
            "--files",
            "4",
            "--bad-fraction",
            "0.01",
        ],  # fmt: skip
        env=env,
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    (log_dir / "generate_events.log").write_text(proc.stdout + proc.stderr)
    assert proc.returncode == 0, f"generate_events failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    assert any(p.is_file() for p in input_dir.rglob("*")), f"generate_events wrote nothing to {input_dir}"


def query(pg: PostgresServer, sql: str, *params) -> list[tuple]:
    conn = pg.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(sql, params)
            return cur.fetchall()
    finally:
        conn.close()


def test_dag_runs_on_postgres_and_spark_cluster(postgres: PostgresServer, tmp_path: Path):
    missing = [
        p
        for p in (
            "dags/pipelines.py",
            "spark_jobs/jobs/sensor_alerts.py",
            "spark_jobs/jobs/generate_events.py",
            "spark_jobs/quality/validate.py",
        )
        if not (REPO_ROOT / p).is_file()
    ]
    if missing:
        pytest.fail(f"the pipeline is incomplete, missing: {', '.join(missing)}")
    if importlib.util.find_spec("asyncpg") is None:
        pytest.fail(
            "asyncpg is not installed: Airflow 3 opens an async engine on the PostgreSQL URL, so every airflow "
            "command fails without it. Add asyncpg==0.32.0 to requirements-dev.txt"
        )

    logs = tmp_path / "logs"
    logs.mkdir()
    api_port = free_port()
    services: list[Service] = []
    with StandaloneCluster.start(workers=2, cores=1, memory="2g", work_dir=tmp_path / "spark") as cluster:
        env = airflow_env(tmp_path, postgres, cluster.master_url, api_port)
        try:
            # 1. The stack's init step, natively: secrets, admin password file, migration onto PostgreSQL.
            admin_password = secrets.token_urlsafe(12)
            init = subprocess.run(
                [sys.executable, str(REPO_ROOT / "docker" / "airflow_init.py")],
                env={**env, "AIRFLOW_ADMIN_PASSWORD": admin_password},
                capture_output=True,
                text=True,
                timeout=600,
            )
            (logs / "airflow-init.log").write_text(init.stdout + init.stderr)
            assert init.returncode == 0, (
                f"airflow_init.py failed:\n{init.stdout[-3000:]}\n{init.stderr[-5000:]}"
            )
            tables = {
                r[0] for r in query(postgres, "SELECT tablename FROM pg_tables WHERE schemaname='public'")
            }
            assert {"dag_run", "task_instance", "alembic_version"} <= tables

            # 2. The job's input.
            var = Path(env["SPARK_JOBS_VAR"])
            generate_events(env, var / "data" / "sensor_alerts" / "input", logs)

            # 3. The Airflow services.
            services.append(
                start_service("api-server", ["airflow", "api-server", "--workers", "1"], env, logs)
            )
            services.append(start_service("dag-processor", ["airflow", "dag-processor"], env, logs))
            services.append(start_service("scheduler", ["airflow", "scheduler"], env, logs))
            base = f"http://127.0.0.1:{api_port}"
            health = wait_for(
                lambda: json.loads(http_get(f"{base}/api/v2/monitor/health")), 300, "the api-server", services
            )
            assert health["metadatabase"]["status"] == "healthy", health
            hc_port = env["AIRFLOW__SCHEDULER__SCHEDULER_HEALTH_CHECK_SERVER_PORT"]
            wait_for(
                lambda: http_status(f"http://127.0.0.1:{hc_port}/health") == 200,
                300,
                "scheduler health",
                services,
            )

            # 4. Log in with the password docker/airflow_init.py wrote (not a generated one).
            login = Api(base).request(
                "POST", "/auth/token", {"username": "admin", "password": admin_password}
            )
            api = Api(base, login["access_token"])
            with pytest.raises(urllib.error.HTTPError) as denied:
                Api(base).request("POST", "/auth/token", {"username": "admin", "password": "wrong-password"})
            assert denied.value.code == 401

            # 5. The DAG, parsed by the dag-processor into PostgreSQL, unpaused and triggered over REST.
            # With a logical date, as the UI's trigger form sends one: the timetable then gives the run its data
            # interval, whose end the DAG passes to the job as its wall clock (a run without a logical date
            # has no data interval in Airflow 3).
            logical_date = dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat()

            def trigger_and_wait(dag_id: str) -> tuple[str, str]:
                """The run id of a triggered run of `dag_id` and the state it finished in."""
                wait_for(
                    lambda: query(postgres, "SELECT 1 FROM serialized_dag WHERE dag_id = %s", dag_id),
                    300,
                    f"{dag_id} in serialized_dag",
                    services,
                )
                api.request("PATCH", f"/api/v2/dags/{dag_id}", {"is_paused": False})
                run = api.request("POST", f"/api/v2/dags/{dag_id}/dagRuns", {"logical_date": logical_date})

                def finished():
                    rows = query(
                        postgres,
                        "SELECT state FROM dag_run WHERE dag_id = %s AND run_id = %s",
                        dag_id,
                        run["dag_run_id"],
                    )
                    return rows and rows[0][0] in ("success", "failed") and rows[0][0]

                state = wait_for(finished, RUN_TIMEOUT_S, f"{dag_id} run", services, interval=5)
                return run["dag_run_id"], state

            apps_before = {a["id"] for a in cluster.state().get("completedapps", [])}
            run_id, state = trigger_and_wait(DAG_ID)
            task_states = dict(
                query(
                    postgres,
                    "SELECT task_id, state FROM task_instance WHERE dag_id = %s AND run_id = %s",
                    DAG_ID,
                    run_id,
                )
            )
            task_logs = "\n".join(
                f"--- {p} ---\n{p.read_text(errors='replace')[-3000:]}"
                for p in sorted(Path(env["AIRFLOW_HOME"], "logs").rglob("*.log"))
            )
            assert state == "success", (
                f"run {run_id} {state}: {task_states} (logs in {logs})\n{task_logs[-20000:]}"
            )

            # 6. The metadata database holds the run and its tasks.
            rows = query(
                postgres,
                "SELECT state, run_type, start_date, end_date FROM dag_run WHERE dag_id = %s AND run_id = %s",
                DAG_ID,
                run_id,
            )
            assert rows and rows[0][0] == "success" and rows[0][1] == "manual" and rows[0][3] >= rows[0][2]
            assert task_states.get("run_sensor_alerts") == "success", task_states
            assert task_states.get("validate_outputs") == "success", task_states
            assert set(task_states.values()) == {"success"}, task_states
            assert api.request("GET", f"/api/v2/dags/{DAG_ID}/dagRuns/{run_id}")["state"] == "success"

            # 7. The streaming job ran on the cluster: the master lists it, finished, with cores. The run's
            # own validation (its batches and a small context) ran in process, without a Spark application.
            state_json = cluster.state()
            new_apps = [a for a in state_json.get("completedapps", []) if a["id"] not in apps_before]
            names = sorted(a["name"] for a in new_apps)
            assert any("sensor_alerts" in n for n in names), names  # the streaming job
            assert not any("validat" in n for n in names), names
            validate_log = "\n".join(
                p.read_text(errors="replace")
                for p in Path(env["AIRFLOW_HOME"], "logs").rglob("*.log")
                if "task_id=validate_outputs" in str(p) and f"dag_id={DAG_ID}" in str(p)
            )
            assert "on local" in validate_log, "the run's validation did not run in process"
            assert all(a["state"] == "FINISHED" for a in new_apps), new_apps
            assert all(a["cores"] >= 1 for a in new_apps), new_apps
            assert state_json["aliveworkers"] == 2

            # 8. Validation passed and the outputs hold rows.
            reports = var / "reports" / "sensor_alerts"
            verdicts = json.loads((reports / "verdicts.json").read_text())
            assert verdicts["run_name"] == run_id, "the verdicts are not this run's"
            assert verdicts["success"] is True, verdicts
            suites = verdicts["suites"]
            assert suites and all(v["success"] for v in suites), [v["line"] for v in suites]
            assert next(v for v in suites if v["suite"] == "window-counts")["rows"] > 0, suites
            output = var / "data" / "sensor_alerts" / "output"
            assert any(output.rglob("*.parquet")), f"no parquet output under {output}"

            # 9. The weekly full-history validation, triggered the same way, runs on the cluster.
            full_dag = "sensor_alerts_full_validation"
            apps_before = {a["id"] for a in cluster.state().get("completedapps", [])}
            full_run_id, full_state = trigger_and_wait(full_dag)
            assert full_state == "success", f"{full_dag}: {full_state} (logs in {env['AIRFLOW_HOME']}/logs)"
            new_apps = [a for a in cluster.state().get("completedapps", []) if a["id"] not in apps_before]
            assert any("validat" in a["name"] and a["state"] == "FINISHED" for a in new_apps), new_apps
            full = json.loads((var / "reports" / "sensor_alerts_full_history" / "verdicts.json").read_text())
            assert full["success"] is True and full["run_name"] == full_run_id, full
        finally:
            for svc in reversed(services):
                svc.stop()
