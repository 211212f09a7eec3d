"""The project's jobs. Each module declares its contract (`spark_jobs.spark.job.JobContract`).

`PIPELINE_JOBS` lists the jobs that get a scheduled pipeline DAG (`<name>_pipeline`); a job of your
own, in any importable package, gets one the same way (see dags/).
"""

PIPELINE_JOBS: tuple[str, ...] = ("spark_jobs.jobs.sensor_alerts", "spark_jobs.jobs.sensor_enrichment")
