"""One pipeline DAG per job, built from the job's contract (`spark_jobs.spark.job.JobContract`).

`pipeline_dag("spark_jobs.jobs.sensor_alerts")` gives the DAG `sensor_alerts_pipeline`:

- a DAG param per job option (same name, same default, JSON-schema checked by the trigger form),
  passed to the job as its `--flag`; validation needs none (the output folder records them);
- `run_<job>` (spark-submit of the job, exactly once, so retried) -> `validate_outputs` (GX; a failed
  suite fails the run) -> `publish_outputs` (outlets: one Asset per output topic, with the run's figures
  as event extras) -> `report_outputs` (a teardown: runs whatever the verdict);
- scheduled on the epoch-aligned grid `k * interval + shift` (`<JOB>_INTERVAL_MINUTES`,
  `<JOB>_SHIFT_MINUTES`, default every 10 minutes at +2).

`full_validation_dag` gives `<job>_full_validation`: weekly, every batch ever published (`--full`, on
Spark), into its own reports folder (shown in Data Docs as `<job>_full_history`).

A job of one's own gets its DAGs by calling these from a DAG file, or by listing its module in
`spark_jobs.jobs.PIPELINE_JOBS`.
"""

from __future__ import annotations

import datetime as dt
import importlib.util
import os
from typing import Any

from airflow.sdk import DAG, Asset, Param, task

from pipeline_airflow.links import RunDataDocsLink
from pipeline_airflow.paths import JobPaths
from pipeline_airflow.spark import SparkJobSubmitOperator
from pipeline_airflow.timetables import AlignedIntervalTimetable

DEFAULT_INTERVAL_MINUTES = 10
DEFAULT_SHIFT_MINUTES = 2


def topic_asset(job: str, output_dir: os.PathLike | str, topic: str) -> Asset:
    """The Asset of one output topic: its Parquet dataset, named `<job>/<topic>`."""
    return Asset(name=f"{job}/{topic}", uri=f"file://{output_dir}/{topic}", group="spark-jobs")


def _schedule(job: str) -> AlignedIntervalTimetable:
    prefix = job.upper()
    interval = int(os.environ.get(f"{prefix}_INTERVAL_MINUTES", DEFAULT_INTERVAL_MINUTES))
    shift = int(os.environ.get(f"{prefix}_SHIFT_MINUTES", DEFAULT_SHIFT_MINUTES))
    return AlignedIntervalTimetable(dt.timedelta(minutes=interval), dt.timedelta(minutes=shift))


def job_arguments(contract: Any, paths: JobPaths) -> list[str]:
    """The job's command line: its folders, the run's wall clock, and every option from the DAG params.

    The wall clock is the end of the run's data interval (an aligned boundary; `ts` writes ISO 8601). A
    run triggered without a logical date has none: it takes the moment it was asked for, which the run
    keeps, so clearing and re-running it reproduces the same wall clock.
    """
    if len(contract.input_topics) == 1:
        inputs = ["--input", str(paths.input)]
    else:  # one folder per input topic, under the job's input folder
        inputs = [a for t in contract.input_topics for a in ("--input", f"{t}={paths.input / t}")]
    options = [a for o in contract.options for a in (o.flag, "{{ params." + o.name + " }}")]
    return [
        *inputs,
        "--output", str(paths.output),
        "--checkpoint", str(paths.checkpoint),
        "--trigger", "available-now",
        "--wall-clock", "{{ (data_interval_end or dag_run.run_after) | ts }}",
        *options,
    ]  # fmt: skip


def _doc(contract: Any, paths: JobPaths, schedule: AlignedIntervalTimetable) -> str:
    from spark_jobs.jobs.describe import job_markdown

    options = "\n".join(f"| `{o.name}` | {o.default} | {o.help} |" for o in contract.options)
    topics = ", ".join(f"`{t}`" for t in contract.output_topics)
    return f"""
### {contract.name}

{contract.description}

Runs **{schedule.summary}** on the epoch-aligned grid (the engine's WALL_CLOCK_TIME grid): the Spark job
once over everything that landed (`--trigger available-now`, exactly once across retries), with the end of
the data interval as its wall clock; then Great Expectations on every output topic (suites derived from
the job's topology and the options it ran with); then the topics' Assets ({topics}) are updated.

| option (DAG param) | default | |
|---|---|---|
{options}

| | |
|---|---|
| input | `{paths.input}` |
| output | `{paths.output}` |
| checkpoint | `{paths.checkpoint}` (its options are fixed: other figures need a new checkpoint and output) |
| reports | `{paths.reports}` |
{job_markdown(contract.module)}"""


def pipeline_dag(job_module: str, **dag_kwargs: Any) -> DAG:
    from spark_jobs.spark.job import JobContract

    contract = JobContract.of(job_module)
    job = contract.name
    paths = JobPaths.for_job(job)
    schedule = dag_kwargs.pop("schedule", None) or _schedule(job)
    assets = [topic_asset(job, paths.output, topic) for topic in contract.output_topics]
    params = {o.name: Param(o.default, **o.json_schema()) for o in contract.options}
    script = importlib.util.find_spec(job_module).origin  # spark-submit runs the module's own file

    with DAG(
        dag_id=f"{job}_pipeline",
        description=contract.description,
        doc_md=_doc(contract, paths, schedule),
        schedule=schedule,
        start_date=dag_kwargs.pop("start_date", dt.datetime(2025, 1, 1, tzinfo=dt.UTC)),
        catchup=False,
        max_active_runs=1,  # one checkpoint: two runs at once would fight over it
        params=params,
        tags=["spark", "streaming", "data-quality", job],
        **dag_kwargs,
    ) as dag:
        run_job = SparkJobSubmitOperator(
            task_id=f"run_{job}",
            name=job,
            script=script,
            application_args=job_arguments(contract, paths),
            # Safe to retry: the checkpoint makes a second attempt commit each batch exactly once.
            retries=2,
            retry_delay=dt.timedelta(minutes=1),
        )
        validate_outputs = _validation("validate_outputs", f"validate_{job}", paths.output, paths.reports)
        validate_outputs.operator_extra_links = (RunDataDocsLink(job=job),)  # this run's verdicts and pages

        @task(outlets=assets)
        def publish_outputs(*, outlet_events=None) -> dict:
            """Runs only once validation passed: each topic's Asset gets an event with the run's figures."""
            from pipeline_airflow.reports import asset_extras

            extras = asset_extras(paths.output, paths.reports)
            for asset in assets:
                topic = asset.name.split("/", 1)[1]
                outlet_events[asset].extra = {**extras["run"], "rows": extras["rows"].get(topic, 0)}
            return extras

        @task
        def report_outputs() -> dict:
            from pipeline_airflow.reports import summarize_outputs

            return summarize_outputs(paths.output, paths.reports)

        # A teardown runs whatever the verdict and does not decide the run's state: validate_outputs does.
        run_job >> validate_outputs >> publish_outputs() >> report_outputs().as_teardown()
    return dag


def full_validation_dag(job_module: str, **dag_kwargs: Any) -> DAG:
    """`<job>_full_validation`: the whole history of the job's output against its suites, weekly.

    A scheduled run validates only what it published (with a small context); this one re-reads every
    batch on Spark, so a rule that only the whole history can show still gets checked.
    """
    from spark_jobs.spark.job import JobContract

    contract = JobContract.of(job_module)
    job = contract.name
    paths = JobPaths.for_job(job)
    with DAG(
        dag_id=f"{job}_full_validation",
        description=f"Every batch {job} ever published, validated against its suites (weekly)",
        doc_md=f"""
### {job}: full-history validation

Validates every batch in `{paths.output}` on Spark (`validate.py --full`) with the suites derived from
the job's contract. Reports and Data Docs go to `{paths.full_reports}` (Data Docs: `{paths.full_reports.name}`),
apart from the scheduled runs' reports and context in `{paths.reports}`. A failed suite fails the run.
""",
        schedule=dag_kwargs.pop("schedule", "@weekly"),
        start_date=dag_kwargs.pop("start_date", dt.datetime(2025, 1, 1, tzinfo=dt.UTC)),
        catchup=False,
        max_active_runs=1,
        tags=["spark", "data-quality", job],
        **dag_kwargs,
    ) as dag:
        _validation(
            "validate_full_history",
            f"validate_{job}_full_history",
            paths.output,
            paths.full_reports,
            "--full",
        )
    return dag


def _validation(task_id: str, name: str, output, reports, *flags: str) -> SparkJobSubmitOperator:
    """A task running `validate.py` on `output` into `reports`, named after the Airflow run."""
    return SparkJobSubmitOperator(
        task_id=task_id,
        name=name,
        script="quality/validate.py",
        application_args=[
            "--output",
            str(output),
            "--reports",
            str(reports),
            *flags,
            "--run-name",
            "{{ run_id }}",
        ],
        retries=0,  # a failed suite is a verdict on the data: retrying cannot change it
    )
