"""The DAGs of every job in `spark_jobs.jobs.PIPELINE_JOBS`, built from its job's contract by
`pipeline_airflow.pipeline`: `<job>_pipeline` (params, schedule, Assets and all) and the weekly
`<job>_full_validation`."""

from __future__ import annotations

from pipeline_airflow.pipeline import full_validation_dag, pipeline_dag

from spark_jobs.jobs import PIPELINE_JOBS

for _module in PIPELINE_JOBS:
    for _dag in (pipeline_dag(_module), full_validation_dag(_module)):
        globals()[_dag.dag_id] = _dag
