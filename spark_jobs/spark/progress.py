"""Progress while a job runs: one log line per micro-batch, also kept in the run summary.

Spark reports each finished micro-batch to StreamingQueryListeners on the driver. The line says which
batch, how many files it admitted (the file sources' input rows: one row per file), how many records
the tasks processed (from the batch's task metrics, folded into the run summary by the sink just before),
the records per second over the batch's duration, and the state store's size. spark-submit's driver log
is the Airflow task's log, so the line shows there while the query runs.
"""

from __future__ import annotations

import logging

from pyspark.sql.streaming import StreamingQueryListener

from spark_jobs.spark.summary import RunSummary

logger = logging.getLogger("spark_jobs.progress")


class BatchProgressLogger(StreamingQueryListener):
    """Logs and records the progress of the query named `query_name` (a session may run others)."""

    def __init__(self, query_name: str, summary: RunSummary):
        self.query_name = query_name
        self.summary = summary

    def onQueryStarted(self, event) -> None:  # noqa: N802 (Spark's names)
        pass

    def onQueryIdle(self, event) -> None:  # noqa: N802
        pass

    def onQueryTerminated(self, event) -> None:  # noqa: N802
        pass

    def onQueryProgress(self, event) -> None:  # noqa: N802
        if event.progress.name == self.query_name:
            self.report(event.progress)

    def report(self, progress) -> None:
        """Record and log one micro-batch's progress (a `StreamingQueryProgress`), once: the listener hears
        of a batch asynchronously, so the runtime also reports the query's last ones when it ends."""
        duration_ms = int(progress.durationMs.get("triggerExecution", 0))
        files = sum(int(source.numInputRows) for source in progress.sources)
        records = self.summary.processed_in_batch(progress.batchId)
        state_rows = sum(int(op.numRowsTotal) for op in progress.stateOperators)
        state_bytes = sum(int(op.memoryUsedBytes) for op in progress.stateOperators)
        line = {
            "batch": progress.batchId,
            "files": files,
            "records": records,
            "records_per_s": round(records * 1000 / duration_ms) if duration_ms else None,
            "duration_ms": duration_ms,
            "state_rows": state_rows,
            "state_bytes": state_bytes,
        }
        if not self.summary.add_progress(line):
            return
        logger.info(
            "batch %d: %d files, %d records, %s records/s, %.1f s, state %d rows / %.1f MB",
            line["batch"],
            files,
            records,
            line["records_per_s"],
            duration_ms / 1000,
            state_rows,
            state_bytes / 1e6,
        )
