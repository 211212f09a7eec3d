"""Validate every topic of a job's output folder with Great Expectations, on Spark.

    python -m spark_jobs.quality.validate --output DIR --reports DIR
    spark-submit <repo>/spark_jobs/quality/validate.py --output DIR --reports DIR   (PYTHONPATH=<repo>)

Nothing job-specific is needed: the output folder records the job and the options it ran with
(`_job.json`), and each topic's suite is derived from that job's topology built with those options, plus
the rules the job's author wrote (derived.py). Each topic is read with `spark.read.parquet` (so only
committed data, and it scales with the cluster), run through its checkpoint, and the results are stored
and rendered as Data Docs under `<reports>/validations` and `<reports>/data_docs/index.html`. One verdict line per suite goes
to stdout, and `<reports>/verdicts.json` keeps them for the Airflow UI. The exit code is 1 when any suite
fails or cannot run (a missing topic, a suite naming an unknown expectation), so the DAG run fails.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import logging
import shutil
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from spark_jobs.quality.data_docs import make_self_contained
from spark_jobs.quality.derived import TopicSuite, topic_suites
from spark_jobs.quality.expectations import topic_view_name
from spark_jobs.quality.local_frames import local_topics
from spark_jobs.quality.local_scope import (
    LOCAL_ROW_LIMIT,
    LocalTopic,
    keep_local_context,
    read_scope,
    scope_rows,
)
from spark_jobs.quality.scope import (
    BATCH_COLUMN,
    context_reach,
    keep_context,
    latest_run_batches,
    scoped_frame,
)
from spark_jobs.spark.errors import ArgumentParser, UserError, exit_on_user_error
from spark_jobs.spark.session import local_spark_session
from spark_jobs.spark.topics import BUILT_IN_TOPICS

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TopicCheck:
    """A topic's suite, and the topic's Arrow schema for when it has no rows (no folder) yet."""

    definition: TopicSuite
    arrow_schema: Any

    @property
    def empty_schema(self) -> Any:
        """The same schema for Spark."""
        from pyspark.sql.pandas.types import from_arrow_schema

        return from_arrow_schema(self.arrow_schema)

    @property
    def suite(self) -> str:
        return self.definition.suite

    @property
    def topic(self) -> str:
        return self.definition.topic


def topic_checks(spec) -> list[TopicCheck]:
    """The checks of a job's output: one per topic it declares, then the quarantine's and the late
    records'."""
    from spark_jobs.spark.topics import (
        DEFAULT_TOPIC_SCHEMA,
        LATE_SCHEMA,
        LATE_TOPIC,
        QUARANTINE_SCHEMA,
        QUARANTINE_TOPIC,
    )

    schemas = spec.topic_schemas
    built_in = {QUARANTINE_TOPIC: QUARANTINE_SCHEMA, LATE_TOPIC: LATE_SCHEMA}
    checks = []
    for suite in topic_suites(spec):
        arrow = (
            built_in[suite.topic]
            if suite.topic in built_in
            else schemas.get(suite.topic, DEFAULT_TOPIC_SCHEMA).arrow_schema()
        )
        checks.append(TopicCheck(suite, arrow))
    return checks


@dataclass
class SuiteVerdict:
    suite: str
    topic: str
    success: bool
    rows: int | None = None
    evaluated: int = 0
    failures: list[str] = field(default_factory=list)
    error: str | None = None
    absent: bool = False

    def line(self) -> str:
        status = "PASSED" if self.success else "FAILED"
        if self.error:
            return f"{status} {self.suite}: {self.error}"
        where = f"on {self.rows} rows of {self.topic}"
        if self.absent:
            where = f"on {self.topic}, which has no rows yet (no folder)"
        if self.success:
            return f"{status} {self.suite}: {self.evaluated}/{self.evaluated} expectations {where}"
        return (
            f"{status} {self.suite}: {len(self.failures)} of {self.evaluated} expectations failed {where}: "
            + "; ".join(self.failures)
        )


def _failure_text(result: Any) -> str:
    name = result.expectation_config.type
    column = (result.expectation_config.kwargs or {}).get("column")
    if column:
        name = f"{name}({column})"
    info = result.exception_info or {}
    if info.get("raised_exception") or any(
        isinstance(v, dict) and v.get("raised_exception") for v in info.values()
    ):
        messages = [info.get("exception_message")] + [
            v.get("exception_message") for v in info.values() if isinstance(v, dict)
        ]
        message = next((m for m in messages if m), "raised an exception")
        return f"{name} raised: {message.splitlines()[0][:300]}"
    details = result.result or {}
    count = details.get("unexpected_count")
    if count is None and isinstance(details.get("observed_value"), int):
        count = details["observed_value"]  # the rules' observed value is their number of unexpected rows
    return f"{name} ({count} unexpected row{'' if count == 1 else 's'})" if count is not None else name


def _read_topic(spark, path: Path, empty_schema):
    """(dataframe, absent, error): a missing folder is an empty topic; an unreadable one is an error.
    The sink's `batch_id=N` folders give every row its `batch_id`."""
    if not path.exists():
        from pyspark.sql import functions as F

        empty = spark.createDataFrame([], empty_schema).withColumn(BATCH_COLUMN, F.lit(None).cast("int"))
        return empty, True, None
    try:
        return spark.read.parquet(str(path)), False, None
    except Exception as error:
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        return None, False, f"cannot read {path}: {first_line[:300]}"


def topic_folders(output: Path) -> list[str]:
    """The topics present in an output folder: every folder but Spark's and the job's own (`_`, `.`)."""
    return sorted(
        p.name
        for p in output.iterdir()
        if p.is_dir() and (p.name in BUILT_IN_TOPICS or not p.name.startswith(("_", ".")))
    )


def prune_old_results(reports: Path, keep: int) -> int:
    """Keep the newest `keep` results of each suite (and their pages); returns how many were removed.

    A DAG validating every few minutes would otherwise grow the store and the Data Docs index forever.
    Results live at `validations/<suite>/<run name>/<run time>/`, their pages at the same place under
    `data_docs/`; run times are UTC stamps that sort as text.
    """
    removed = 0
    store = reports / "validations"
    if keep < 0 or not store.is_dir():
        return removed
    for suite_dir in (p for p in store.iterdir() if p.is_dir()):
        runs = sorted(
            (run for name_dir in suite_dir.iterdir() if name_dir.is_dir() for run in name_dir.iterdir()),
            key=lambda run: run.name,
            reverse=True,
        )
        for run in runs[keep:]:
            relative = run.relative_to(store)
            shutil.rmtree(run)
            shutil.rmtree(reports / "data_docs" / "validations" / relative, ignore_errors=True)
            removed += 1
            for parent in (run.parent, reports / "data_docs" / "validations" / relative.parent):
                if parent.is_dir() and not any(parent.iterdir()):
                    parent.rmdir()
    return removed


def validate_output(
    spark,
    output: Path | str,
    reports: Path | str,
    context_root: Path | str | None = None,
    run_name: str | None = None,
    only: Sequence[str] | None = None,
    keep_results: int = 100,
    batches: Sequence[int] | None | str = "latest",
    engine: str = "auto",
    master: str | None = None,
) -> list[SuiteVerdict]:
    """Validate each topic of `output` with the suite its job's contract gives it; results and Data Docs
    go under `reports`.

    `batches`: the batch ids to validate, with the context earlier runs kept (scope.py); "latest" (the
    default) takes those the latest run published; None validates the whole history.
    `engine`: "local" evaluates the scope in this process (pandas), "spark" on Spark (`spark`, or a
    session started on `master` when None); "auto" takes local for a scope of batches up to
    `LOCAL_ROW_LIMIT` rows and Spark for the whole history or a larger scope.
    `only` names the suites to run (default all); every topic is still read, since rules compare topics.
    Each suite keeps its newest `keep_results` results, this run's included (0: keep all).
    """
    # GX is imported here, not at module level, so `--help` and argument errors stay fast.
    from great_expectations.core.run_identifier import RunIdentifier

    from spark_jobs.quality.gx_context import SuiteIntegrityError, add_suites, open_context
    from spark_jobs.spark.job import recorded_job

    output, reports = Path(output), Path(reports)
    reports.mkdir(parents=True, exist_ok=True)
    if keep_results > 0:
        prune_old_results(reports, keep_results - 1)  # before the run: its docs build sees the pruned store
    context = open_context(reports_dir=reports, root=context_root)
    run_id = RunIdentifier(run_name=run_name or output.resolve().name, run_time=dt.datetime.now(dt.UTC))

    if not output.is_dir():
        # A wrong path, or a job that never ran: not the same as topics without rows.
        verdicts = [SuiteVerdict("output", str(output), False, error=f"no output folder at {output}")]
        _finish(context, reports, run_id, output, verdicts)
        return verdicts
    try:
        spec = recorded_job(output)
    except FileNotFoundError as error:
        verdicts = [SuiteVerdict("output", str(output), False, error=str(error))]
        _finish(context, reports, run_id, output, verdicts)
        return verdicts
    checks = topic_checks(spec)
    selected = [check for check in checks if only is None or check.suite in only]
    unknown = set(only or ()) - {check.suite for check in checks}
    if unknown:
        raise ValueError(f"no such suites: {sorted(unknown)}; {spec.module} has {[c.suite for c in checks]}")
    parameters = spec.effective_options()
    present = topic_folders(output)
    if batches == "latest":
        batches = latest_run_batches(output)
    batches = None if batches is None else sorted(batches)
    engine = choose_engine(engine, output, [c.topic for c in checks], reports, batches)
    logger.info("validating %s on %s", "every batch" if batches is None else f"batches {batches}", engine)
    try:
        checkpoints = add_suites(context, [check.definition for check in selected], engine=engine)
    except SuiteIntegrityError as error:
        verdicts = [SuiteVerdict(c.suite, c.topic, False, error=str(error)) for c in selected]
        _finish(context, reports, run_id, output, verdicts)
        return verdicts
    if engine == "spark" and spark is None:
        spark = local_spark_session("validate-outputs", master=master)

    # Every topic is read first: rules may compare a topic with another one.
    frames: dict[str, Any] = {}
    new_rows: dict[str, Any] = {}
    absent: set[str] = set()
    read_errors: dict[str, str] = {}
    local: dict[str, LocalTopic] = {}
    for check in checks:
        if engine == "local":
            try:
                local[check.topic] = read_scope(output, check.topic, reports, batches, check.arrow_schema)
            except Exception as error:
                read_errors[check.topic] = f"cannot read {output / check.topic}: {_first_line(error)}"
                continue
            frames[check.topic] = local[check.topic].frame()
            new_rows[check.topic] = local[check.topic].new_rows
            if local[check.topic].absent:
                absent.add(check.topic)
            continue
        frame, is_absent, error = _read_topic(spark, output / check.topic, check.empty_schema)
        if frame is None:
            read_errors[check.topic] = error
            continue
        if is_absent:
            absent.add(check.topic)
        frame, new_rows[check.topic] = scoped_frame(spark, frame, check.topic, reports, batches)
        frame = frame.cache()
        frame.createOrReplaceTempView(topic_view_name(check.topic))
        frames[check.topic] = frame

    verdicts = []
    with contextlib.ExitStack() as cleanup:
        if engine == "local":
            cleanup.enter_context(local_topics(frames))  # the topics cross-topic rules read
        else:
            cleanup.callback(_release_views, spark, frames)
        for check in selected:
            if check.topic in read_errors:
                verdicts.append(SuiteVerdict(check.suite, check.topic, False, error=read_errors[check.topic]))
                continue
            frame = frames[check.topic]
            started = time.monotonic()
            try:
                result = checkpoints[check.suite].run(
                    batch_parameters={"dataframe": frame}, expectation_parameters=parameters, run_id=run_id
                )
                rows = new_rows[check.topic]
                rows = rows if isinstance(rows, int) else rows.count()
            except Exception as error:  # one broken topic must not hide the verdicts of the others
                logger.exception("suite %s could not run", check.suite)
                message = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
                verdicts.append(
                    SuiteVerdict(check.suite, check.topic, False, error=f"could not run: {message[:300]}")
                )
                continue
            expectation_results = [r for run in result.run_results.values() for r in run.results]
            verdicts.append(
                SuiteVerdict(
                    suite=check.suite,
                    topic=check.topic,
                    success=bool(result.success),
                    rows=rows,
                    evaluated=len(expectation_results),
                    failures=[_failure_text(r) for r in expectation_results if not r.success],
                    absent=check.topic in absent,
                )
            )
            logger.info(
                "suite %s: %s in %.1f s",
                check.suite,
                "passed" if result.success else "FAILED",
                time.monotonic() - started,
            )
        if only is None:
            # Every topic must be checked by some suite: a new topic without one fails the run.
            checked = {check.topic for check in checks}
            for topic in present:
                if topic not in checked:
                    error = (
                        f"topic {topic!r} is not an output topic of {spec.module}: declare it in its "
                        "OUTPUT_TOPICS (its suite derives from the contract)"
                    )
                    verdicts.append(SuiteVerdict(topic, topic, False, error=error))
        if only is None:  # what the next run needs from this one and the history before it
            started = time.monotonic()
            reach = context_reach(spec)
            kept = {
                topic: keep_local_context(local[topic], topic, reports, reach)
                if engine == "local"
                else keep_context(spark, frame, topic, reports, reach)
                for topic, frame in frames.items()
            }
            logger.info("context kept for the next run: %s rows in %.1f s", kept, time.monotonic() - started)
    _finish(context, reports, run_id, output, verdicts)
    return verdicts


def _release_views(spark, frames: dict[str, Any]) -> None:
    for topic, frame in frames.items():
        frame.unpersist()
        spark.catalog.dropTempView(topic_view_name(topic))


def choose_engine(
    requested: str, output: Path, topics: list[str], reports: Path, batches: list[int] | None
) -> str:
    """Where the scope is validated: "local" (in this process) or "spark" (see `validate_output`)."""
    if requested not in ("auto", "local", "spark"):
        raise ValueError(f"engine must be auto, local or spark, got {requested!r}")
    if requested == "local" and batches is None:
        raise ValueError("the whole history (--full) is validated on Spark, not locally")
    if requested != "auto":
        return requested
    if batches is None:
        return "spark"
    rows = scope_rows(output, topics, reports, batches)
    return "local" if rows <= LOCAL_ROW_LIMIT else "spark"


def _first_line(error: Exception) -> str:
    text = str(error).strip()
    return text.splitlines()[0][:300] if text else type(error).__name__


def _finish(context: Any, reports: Path, run_id: Any, output: Path, verdicts: list[SuiteVerdict]) -> None:
    site = reports / "data_docs"
    context.build_data_docs()  # once, after every suite ran (checkpoints do not build it each)
    make_self_contained(site)
    _write_verdicts(reports, run_id, output, verdicts)


def _write_verdicts(reports: Path, run_id: Any, output: Path, verdicts: list[SuiteVerdict]) -> None:
    summary = {
        "run_name": run_id.run_name,
        "run_time": run_id.run_time.isoformat(),
        "output": str(output),
        "success": all(v.success for v in verdicts),
        "suites": [{**asdict(v), "line": v.line()} for v in verdicts],
    }
    from spark_jobs.quality.history import GX_RUN_TIME_FORMAT, append_history, record_run, write_atomically

    write_atomically(reports / "verdicts.json", json.dumps(summary, indent=2))
    # The UI's history and this run's page; the Data Docs are built by now.

    append_history(reports, summary)
    record_run(reports, summary, run_id.run_time.astimezone(dt.UTC).strftime(GX_RUN_TIME_FORMAT))


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        prog="python -m spark_jobs.quality.validate",
        description="Validate every topic of an output folder with Great Expectations; "
        "exit 1 when any suite fails.",
    )
    parser.add_argument("--output", required=True, type=Path, help="the job's output folder")
    parser.add_argument(
        "--reports", required=True, type=Path, help="where results and Data Docs (data_docs/) go"
    )
    parser.add_argument(
        "--context-root",
        type=Path,
        default=None,
        help="template of the GX context (default: <repo>/expectations)",
    )
    parser.add_argument("--run-name", default=None, help="name of this run in Data Docs (e.g. a DAG run id)")
    parser.add_argument(
        "--suite",
        action="append",
        dest="suites",
        metavar="SUITE",
        help="run only this suite (a topic name, or quarantine; repeatable; default: every suite, and "
        "topics the job does not declare fail)",
    )
    scope = parser.add_mutually_exclusive_group()
    scope.add_argument(
        "--full",
        action="store_true",
        help="validate every batch ever published (default: the batches of the latest run, with the "
        "context earlier validations kept)",
    )
    scope.add_argument(
        "--batches",
        type=lambda text: [int(b) for b in text.split(",") if b.strip()],
        default=None,
        metavar="N,M,...",
        help="validate these batch ids (with the kept context)",
    )
    parser.add_argument(
        "--keep-results",
        type=int,
        default=100,
        help="results (and Data Docs pages) kept per suite, this run's included; 0 keeps all (default 100)",
    )
    parser.add_argument(
        "--engine",
        choices=("auto", "local", "spark"),
        default="auto",
        help="where rules run: local (this process, pandas) or spark; auto (default) is local for a "
        f"run's batches up to {LOCAL_ROW_LIMIT:,} rows with their context, spark for --full or more",
    )
    parser.add_argument("--master", default=None, help="Spark master (default $SPARK_MASTER or local[2])")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Validate, print a line per suite; exit 1 when a suite fails, 2 on a user's mistake (`errors`)."""
    with exit_on_user_error():
        return _main(argv)


def _main(argv: Sequence[str] | None) -> int:
    from spark_jobs.spark.job import recorded_job

    parser = build_parser()
    args = parser.parse_args(argv)
    if args.full and args.engine == "local":
        parser.error("--full validates the whole history on Spark: leave out --engine local")
    if not args.output.is_dir():
        raise UserError(f"no output folder at {args.output}: check the path, or run the job first")
    recorded_job(args.output)  # a folder no job of this project wrote is refused, naming the missing record
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logger.setLevel(logging.INFO)  # one line per suite, with its time; GX's own INFO lines are noise
    verdicts = validate_output(
        None,  # a Spark session starts only if the engine is Spark
        master=args.master,
        engine=args.engine,
        output=args.output,
        reports=args.reports,
        context_root=args.context_root,
        run_name=args.run_name,
        keep_results=args.keep_results,
        only=args.suites,
        batches=None if args.full else (args.batches if args.batches is not None else "latest"),
    )
    for verdict in verdicts:
        print(verdict.line(), flush=True)
    index = (args.reports / "data_docs" / "index.html").resolve()
    print(f"Data Docs: {index}", flush=True)
    return 0 if verdicts and all(v.success for v in verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
