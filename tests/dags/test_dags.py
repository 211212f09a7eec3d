"""Every DAG imports, serializes as the DAG processor stores it, and says what it runs."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pendulum
import pytest
from airflow.dag_processing.dagbag import DagBag
from airflow.exceptions import SerializationError
from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG
from airflow.sdk.definitions.param import ParamValidationError
from airflow.serialization.encoders import encode_timetable
from airflow.serialization.serialized_objects import DagSerialization
from pipeline_airflow.sensors import WallClockPunctuationSensor
from pipeline_airflow.spark import (
    connection_for_master,
    master_env,
    resolved_master,
    spark_connection_id,
    spark_job_env,
)
from pipeline_airflow.timetables import AlignedIntervalTimetable

REPO_ROOT = Path(__file__).resolve().parents[2]
DAG_IDS = {
    "sensor_alerts_pipeline",
    "sensor_alerts_full_validation",
    "sensor_enrichment_pipeline",
    "sensor_enrichment_full_validation",
    "wall_clock_ticks",
    "window_finals_consumer",
}
MIN = dt.timedelta(minutes=1)


def load_dags() -> DagBag:
    """A fresh parse of dags/: DAG files read the environment when imported."""
    bag = DagBag(dag_folder=REPO_ROOT / "dags")
    assert bag.import_errors == {}
    return bag


def serialize_round_trip(dag: DAG):
    """What the DAG processor stores (JSON) and the scheduler and UI read back."""
    return DagSerialization.from_dict(json.loads(json.dumps(DagSerialization.to_dict(dag))))


@pytest.fixture(scope="module")
def dags() -> dict[str, DAG]:
    return load_dags().dags


def test_every_dag_file_imports(dags):
    assert set(dags) == DAG_IDS


@pytest.mark.parametrize("dag_id", sorted(DAG_IDS))
def test_every_dag_serializes_and_reads_back(dags, dag_id):
    dag = dags[dag_id]
    back = serialize_round_trip(dag)
    assert set(back.task_ids) == set(dag.task_ids)
    assert encode_timetable(back.timetable) == encode_timetable(dag.timetable)
    assert dag.doc_md and dag.description


def test_a_pipeline_dags_documentation_draws_its_topology_and_lists_its_rules(dags):
    doc = dags["sensor_alerts_pipeline"].doc_md
    assert "```text\n(sensor-readings)\n └─▶ Source: KSTREAM-SOURCE-0000000000" in doc
    assert "│ [Suppress; store: suppress_buffer]\n" in doc
    assert "- `window-finals`: derived from the topology: " in doc


def test_an_unregistered_timetable_fails_that_serialization():
    class UnregisteredTimetable(AlignedIntervalTimetable):
        """The same timetable under an import path no plugin registered."""

    with DAG(
        "unregistered", schedule=UnregisteredTimetable(10 * MIN), start_date=pendulum.datetime(2025, 1, 1)
    ) as dag:
        EmptyOperator(task_id="nothing")
    with pytest.raises(SerializationError, match="is not registered"):
        serialize_round_trip(dag)


class TestSensorAlertsPipeline:
    def test_runs_the_job_then_validates_then_publishes_then_reports_whatever_the_verdict(self, dags):
        dag = dags["sensor_alerts_pipeline"]
        job, validate, publish, report = (
            dag.get_task(t)
            for t in ("run_sensor_alerts", "validate_outputs", "publish_outputs", "report_outputs")
        )
        assert job.downstream_task_ids == {"validate_outputs"}
        assert validate.downstream_task_ids == {"publish_outputs"}
        assert publish.downstream_task_ids == {"report_outputs"}
        # A teardown runs after a failed validation and leaves the run's state to validate_outputs.
        assert report.is_teardown and not report.on_failure_fail_dagrun

    def test_a_param_per_job_option_with_its_default_and_schema(self, dags):
        from spark_jobs.spark.job import JobContract

        dag = dags["sensor_alerts_pipeline"]
        contract = JobContract.of("spark_jobs.jobs.sensor_alerts")
        assert list(dag.params) == [o.name for o in contract.options]
        for option in contract.options:
            param = dag.params.get_param(option.name)
            assert param.value == option.default and param.schema["type"] == "integer"
        with pytest.raises(ParamValidationError):
            dag.params.get_param("window_size").resolve("two minutes")
        back = serialize_round_trip(dag)
        assert {name: back.params[name] for name in dag.params} == {
            o.name: o.default for o in contract.options
        }

    def test_the_job_gets_each_option_from_its_param(self, dags):
        dag = dags["sensor_alerts_pipeline"]
        args = dag.get_task("run_sensor_alerts").application_args
        flag = args.index("--window-size")
        rendered = dag.get_template_env().from_string(args[flag + 1]).render(params={"window_size": 300000})
        assert rendered == "300000"
        assert args[args.index("--grace") + 1] == "{{ params.grace }}"

    def test_each_output_topic_is_an_asset_published_after_validation(self, dags):
        from spark_jobs.jobs.sensor_alerts import OUTPUT_TOPICS

        dag = dags["sensor_alerts_pipeline"]
        outlets = dag.get_task("publish_outputs").outlets
        assert [a.name for a in outlets] == [f"sensor_alerts/{t}" for t in OUTPUT_TOPICS]
        assert all(a.uri.endswith(f"/output/{a.name.split('/')[1]}") for a in outlets)
        assert (
            dag.get_task("run_sensor_alerts").outlets == [] and dag.get_task("validate_outputs").outlets == []
        )

    def test_the_example_consumer_runs_on_new_window_finals(self, dags):
        consumer = dags["window_finals_consumer"]
        [asset] = consumer.timetable.asset_condition.objects
        assert asset.name == "sensor_alerts/window-finals"

    def test_is_scheduled_every_10_minutes_at_plus_2_one_run_at_a_time(self, dags):
        dag = dags["sensor_alerts_pipeline"]
        assert dag.timetable == AlignedIntervalTimetable(10 * MIN, 2 * MIN)
        assert dag.timetable.summary == "every 10m, +2m"
        assert dag.max_active_runs == 1
        assert serialize_round_trip(dag).timetable == dag.timetable

    def test_interval_and_shift_come_from_the_environment(self, monkeypatch):
        monkeypatch.setenv("SENSOR_ALERTS_INTERVAL_MINUTES", "90")
        monkeypatch.setenv("SENSOR_ALERTS_SHIFT_MINUTES", "20")
        assert load_dags().dags["sensor_alerts_pipeline"].timetable.summary == "every 1h30m, +20m"

    def test_the_job_is_retried_and_the_validation_is_not(self, dags):
        dag = dags["sensor_alerts_pipeline"]
        assert dag.get_task("run_sensor_alerts").retries == 2
        assert dag.get_task("validate_outputs").retries == 0

    def test_the_job_gets_stable_paths_and_the_run_wall_clock(self, monkeypatch, tmp_path):
        monkeypatch.setenv("SPARK_JOBS_VAR", str(tmp_path))
        monkeypatch.setenv("SENSOR_ALERTS_CHECKPOINT", str(tmp_path / "elsewhere"))
        dag = load_dags().dags["sensor_alerts_pipeline"]
        job = dag.get_task("run_sensor_alerts")
        assert job.application == str(REPO_ROOT / "spark_jobs" / "jobs" / "sensor_alerts.py")
        args = dict(zip(job.application_args[::2], job.application_args[1::2], strict=True))
        assert args["--input"] == str(tmp_path / "data" / "sensor_alerts" / "input")
        assert args["--output"] == str(tmp_path / "data" / "sensor_alerts" / "output")
        assert args["--checkpoint"] == str(tmp_path / "elsewhere")
        assert args["--trigger"] == "available-now"
        rendered = (
            dag.get_template_env()
            .from_string(args["--wall-clock"])
            .render(data_interval_end=pendulum.datetime(2024, 1, 1, 0, 12, tz="UTC"))
        )
        assert rendered == "2024-01-01T00:12:00+00:00"
        # A run triggered with no logical date has no data interval; it must still get a wall clock.
        unscheduled = (
            dag.get_template_env()
            .from_string(args["--wall-clock"])
            .render(
                data_interval_end=None,
                dag_run=SimpleNamespace(run_after=pendulum.datetime(2024, 1, 1, 0, 13, 5, tz="UTC")),
            )
        )
        assert unscheduled == "2024-01-01T00:13:05+00:00"

        validate = dag.get_task("validate_outputs")
        assert validate.application == str(REPO_ROOT / "spark_jobs" / "quality" / "validate.py")
        assert validate.application_args == [
            "--output", str(tmp_path / "data" / "sensor_alerts" / "output"),
            "--reports", str(tmp_path / "reports" / "sensor_alerts"),
            "--run-name", "{{ run_id }}",
        ]  # fmt: skip


class TestFullValidation:
    def test_weekly_every_batch_on_spark_into_its_own_reports(self, monkeypatch, tmp_path):
        monkeypatch.setenv("SPARK_JOBS_VAR", str(tmp_path))
        dags = load_dags().dags
        dag = serialize_round_trip(dags["sensor_alerts_full_validation"])
        assert dag.timetable.summary == "0 0 * * 0" and dag.max_active_runs == 1  # @weekly: Sundays 00:00
        [task] = dags["sensor_alerts_full_validation"].tasks
        assert task.application == str(REPO_ROOT / "spark_jobs" / "quality" / "validate.py")
        output = tmp_path / "data" / "sensor_alerts" / "output"
        assert task.application_args == [
            "--output", str(output),
            "--reports", str(tmp_path / "reports" / "sensor_alerts_full_history"),
            "--full",
            "--run-name", "{{ run_id }}",
        ]  # fmt: skip
        # The scheduled runs' context stays theirs: the weekly run never writes into their reports.
        runs = dags["sensor_alerts_pipeline"].get_task("validate_outputs").application_args
        assert runs[runs.index("--reports") + 1] != task.application_args[3]

    def test_the_full_flag_parses_to_the_whole_history_on_spark(self):
        from spark_jobs.quality.validate import build_parser

        [task] = load_dags().dags["sensor_alerts_full_validation"].tasks
        args = build_parser().parse_args([a.replace("{{ run_id }}", "manual") for a in task.application_args])
        assert args.full and args.engine == "auto" and args.run_name == "manual"


class TestSparkSettings:
    """The Spark cluster is the Airflow connection `spark_pipeline`, resolved when a task runs."""

    @pytest.fixture(autouse=True)
    def no_spark_connection(self, monkeypatch):
        monkeypatch.delenv("AIRFLOW_CONN_SPARK_PIPELINE", raising=False)

    def test_importing_the_dags_defines_no_connection(self, monkeypatch, dags):
        monkeypatch.setenv("SPARK_MASTER", "spark://not-a-connection:7077")
        assert "sensor_alerts_pipeline" in dags
        assert "AIRFLOW_CONN_SPARK_PIPELINE" not in os.environ
        assert dags["sensor_alerts_pipeline"].get_task("run_sensor_alerts")._conn_id == spark_connection_id()

    def test_a_missing_connection_fails_saying_how_to_define_it(self):
        with pytest.raises(LookupError, match="airflow connections add spark_pipeline --conn-type spark"):
            resolved_master()

    @pytest.mark.parametrize("master", ["local[2]", "spark://spark-master:7077"])
    def test_the_master_is_the_connection_host_as_the_provider_reads_it(self, monkeypatch, master):
        monkeypatch.setenv("AIRFLOW_CONN_SPARK_PIPELINE", json.dumps(connection_for_master(master)))
        monkeypatch.setenv("SPARK_MASTER", "spark://ignored:7077")
        assert resolved_master() == master
        assert SparkSubmitHook(conn_id=spark_connection_id())._resolve_connection()["master"] == master

    def test_the_uri_form_the_readme_shows_resolves_to_the_cluster(self, monkeypatch):
        monkeypatch.setenv("AIRFLOW_CONN_SPARK_PIPELINE", "spark://127.0.0.1:7077")
        assert resolved_master() == "spark://127.0.0.1:7077"

    def test_a_local_driver_binds_to_loopback_and_a_cluster_driver_does_not(self, monkeypatch):
        monkeypatch.delenv("SPARK_LOCAL_IP", raising=False)
        assert master_env("local[*]") == {"SPARK_MASTER": "local[*]", "SPARK_LOCAL_IP": "127.0.0.1"}
        assert master_env("spark://spark-master:7077") == {"SPARK_MASTER": "spark://spark-master:7077"}
        monkeypatch.setenv("SPARK_LOCAL_IP", "10.0.0.5")  # what the user set wins
        assert master_env("local[*]") == {"SPARK_MASTER": "local[*]"}

    def test_jobs_import_this_checkout_with_this_interpreter(self):
        env = spark_job_env()
        assert env["PYTHONPATH"].split(os.pathsep)[0] == str(REPO_ROOT)
        assert Path(env["PYSPARK_PYTHON"]).exists()

    @pytest.mark.airflow
    def test_the_setup_script_adds_the_connection_once_and_keeps_an_edited_one(self, tmp_path):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "SPARK_MASTER"))}
        env.update(AIRFLOW_HOME=str(tmp_path), AIRFLOW__CORE__LOAD_EXAMPLES="False")
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"

        def run(*command, **extra):
            done = subprocess.run(command, env={**env, **extra}, capture_output=True, text=True, timeout=300)
            assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
            return done.stdout

        def master_in_database():
            [connection] = json.loads(run("airflow", "connections", "get", "spark_pipeline", "-o", "json"))
            return connection["host"]

        define = [sys.executable, str(REPO_ROOT / "scripts" / "define_spark_connection.py")]
        run("airflow", "db", "migrate")
        assert "added with master spark://cluster:7077" in run(*define, SPARK_MASTER="spark://cluster:7077")
        assert master_in_database() == "spark://cluster:7077"
        run("airflow", "connections", "delete", "spark_pipeline")
        run(
            "airflow",
            "connections",
            "add",
            "spark_pipeline",
            "--conn-type",
            "spark",
            "--conn-host",
            "local[2]",
        )
        assert "kept as it is" in run(*define)  # SPARK_MASTER unset would say local[*]: the edit wins
        assert master_in_database() == "local[2]"


class TestWallClockTicks:
    def test_runs_back_to_back_and_waits_in_the_triggerer(self, dags):
        dag = dags["wall_clock_ticks"]
        assert serialize_round_trip(dag).timetable.summary == "@continuous" and dag.max_active_runs == 1
        sensor = dag.get_task("wait_for_boundary")
        assert isinstance(sensor, WallClockPunctuationSensor) and sensor.deferrable
        assert dag.get_task("record_tick").upstream_task_ids == {"wait_for_boundary"}

    @pytest.mark.airflow
    def test_a_test_run_records_the_boundary_it_waited_for(self, airflow_db, monkeypatch, tmp_path):
        monkeypatch.setenv("SPARK_JOBS_VAR", str(tmp_path))
        monkeypatch.setenv("WALL_CLOCK_TICK_INTERVAL_SECONDS", "2")
        monkeypatch.setenv("WALL_CLOCK_TICK_SHIFT_SECONDS", "1")
        dag = load_dags().dags["wall_clock_ticks"]
        started_ms = pendulum.now("UTC").int_timestamp * 1000

        run = dag.test()  # runs the DateTimeTrigger inline

        assert run.state == "success"
        ticks = (tmp_path / "data" / "wall_clock_ticks" / "ticks.jsonl").read_text().splitlines()
        assert len(ticks) == 1
        tick = json.loads(ticks[0])
        assert tick["boundary_ms"] % 2000 == 1000 and tick["boundary_ms"] >= started_ms
        assert tick["recorded_ms"] >= tick["boundary_ms"]
        assert tick["lateness_ms"] == tick["recorded_ms"] - tick["boundary_ms"]
