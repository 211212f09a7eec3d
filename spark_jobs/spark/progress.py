"""Progress while a job runs: one log line per micro-batch, also kept in the run summary.

The runtime polls its query's last progress while it waits for the query (`BatchProgressLogger.poll`,
every `POLL_S`), and once more when the query has ended. The line says which batch, how many files it
admitted (the file sources' input rows: one row per file), how many records the tasks processed (from the
batch's task metrics, folded into the run summary by the sink just before), the records per second over
the batch's duration, and the state store's size. spark-submit's driver log is the Airflow task's log, so
the line shows there while the query runs.

Not a Python `StreamingQueryListener`: pyspark builds each event it hands one from the JVM's object field
by field, a few hundred Py4J calls per micro-batch, some of which end in exceptions whose conversion looks
classes up through every jar: driver CPU taken from the query beside it. A poll is two Py4J calls and one
JSON document.
"""

from __future__ import annotations

import logging

from spark_jobs.spark.summary import RunSummary

logger = logging.getLogger("spark_jobs.progress")

# Seconds between two looks at the query's progress while it runs: how late a batch's line may be logged.
POLL_S = 0.5


class BatchProgressLogger:
    """Logs and records the progress of one query's micro-batches, each once and in order."""

    def __init__(self, summary: RunSummary):
        self.summary = summary
        self._last_batch: int | None = None

    def poll(self, query) -> None:
        """Report the batches `query` (a `StreamingQuery`) finished since the last poll: its last progress,
        or all its recent ones if more than that one are new (Spark keeps the last 100)."""
        last = query.lastProgress
        if last is None or (self._last_batch is not None and last.batchId <= self._last_batch):
            return
        for progress in [last] if self._last_batch == last.batchId - 1 else query.recentProgress:
            self.report(progress)
        self._last_batch = last.batchId

    def report(self, progress) -> None:
        """Record one micro-batch's progress (a `StreamingQueryProgress`), and log it the first time."""
        duration_ms = int(progress.durationMs.get("triggerExecution", 0))
        self.summary.batch_durations_ms[progress.batchId] = duration_ms
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
