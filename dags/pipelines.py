"""The pipeline DAG of every job in `spark_jobs.jobs.PIPELINE_JOBS` (`<job>_pipeline`), each built from
its job's contract by `pipeline_airflow.pipeline.pipeline_dag`: params, schedule, Assets and all."""

from __future__ import annotations

from pipeline_airflow.pipeline import pipeline_dag

from spark_jobs.jobs import PIPELINE_JOBS

for _module in PIPELINE_JOBS:
    _dag = pipeline_dag(_module)
    globals()[_dag.dag_id] = _dag
