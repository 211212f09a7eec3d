"""The command line every job shares (docs/jobs.md), plus the job's own topology options.

A job declares its options once (`JobOption`, with their defaults); each becomes a `--flag` and a
`build_topology` keyword, whose default `with_option_defaults` takes from the same `JobOption`, and
`JobContract` refuses a job whose build_topology writes a default of its own that disagrees, so the
command line and the Python API cannot drift apart.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import sys

from spark_jobs.spark.errors import ArgumentParser, UserError, exit_on_user_error
from spark_jobs.spark.job import JobOption, JobSpec, parse_duration_ms
from spark_jobs.spark.runtime import AVAILABLE_NOW, TRIGGERS, RunConfig, check_run, run_job


def parse_wall_clock(text: str) -> int:
    """ISO 8601 (a naive time is UTC) or epoch milliseconds -> epoch milliseconds."""
    if re.fullmatch(r"\d+", text.strip()):
        return int(text)
    try:
        moment = dt.datetime.fromisoformat(text.strip())
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not an ISO 8601 time or epoch ms: {text!r}") from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    delta = moment - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    return delta.days * 86_400_000 + delta.seconds * 1000 + delta.microseconds // 1000


def int_at_least(minimum: int):
    """An argparse type: an integer of at least `minimum`, else an error naming the value."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from exc
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value

    return parse


positive_int = int_at_least(1)  # partitions, files, tasks
non_negative_int = int_at_least(0)


def parse_inputs(given: list[str], topics: tuple[str, ...]) -> str | dict[str, str]:
    """`--input` values -> a folder (one-input job given DIR) or {topic: folder}; an unknown, missing or
    repeated topic, or a bare DIR for a job with several inputs, is an error naming it."""
    if len(given) == 1 and len(topics) == 1 and not given[0].startswith(topics[0] + "="):
        return given[0]
    dirs: dict[str, str] = {}
    for text in given:
        topic, sep, directory = text.partition("=")
        if not sep or not topic or not directory:
            raise UserError(
                f"--input {text}: {'give TOPIC=DIR for each of its topics' if len(topics) > 1 else 'expected DIR'}"
                f" (input topics: {', '.join(topics)})"
            )
        if topic not in topics:
            raise UserError(
                f"--input {text}: {topic!r} is not an input topic (input topics: {', '.join(topics)})"
            )
        if topic in dirs:
            raise UserError(f"--input {text}: topic {topic!r} given twice")
        dirs[topic] = directory
    missing = [topic for topic in topics if topic not in dirs]
    if missing:
        raise UserError(f"no --input for topics {', '.join(missing)}: give --input TOPIC=DIR for each")
    return dirs


def build_parser(prog: str, description: str, options: list[JobOption]) -> argparse.ArgumentParser:
    parser = ArgumentParser(prog=prog, description=description)
    run = parser.add_argument_group("run")
    run.add_argument(
        "--input",
        required=True,
        action="append",
        metavar="[TOPIC=]DIR",
        help="landing directory of JSON-lines or Parquet files: DIR for a one-input job, TOPIC=DIR once per "
        "input topic for a job with several",
    )
    run.add_argument("--output", required=True, help="one Parquet dataset per topic is written under it")
    run.add_argument(
        "--checkpoint", required=True, help="Spark checkpoint, task state and wall-clock markers"
    )
    run.add_argument("--trigger", choices=TRIGGERS, default=AVAILABLE_NOW)
    run.add_argument("--max-files-per-trigger", type=positive_int, default=None, metavar="N")
    run.add_argument(
        "--wall-clock",
        type=parse_wall_clock,
        default=None,
        metavar="ISO8601",
        help="available-now: advance every task's wall clock to this time after the run's input",
    )
    run.add_argument(
        "--partitions", type=positive_int, default=4, help="input partitions = tasks (default 4)"
    )
    run.add_argument("--master", default=None, help="Spark master (default $SPARK_MASTER or local[2])")
    run.add_argument(
        "--shuffle-partitions",
        type=positive_int,
        default=None,
        help="parallelism of the stateful stage (default: spark.sql.shuffle.partitions, 2 unless set); "
        "fixed by the checkpoint on its first run",
    )
    run.add_argument(
        "--live-spark-tasks",
        type=non_negative_int,
        default=0,
        metavar="N",
        help="Spark tasks whose task state a Python worker keeps live between micro-batches, caught up "
        "from the changes when it runs them again; each costs its partitions' state in every worker's "
        "memory (default 0: a task's state is read from the store at each micro-batch)",
    )
    run.add_argument(
        "--processing-interval",
        default="10 seconds",
        help="continuous: micro-batch interval (default 10 seconds)",
    )
    run.add_argument(
        "--wall-clock-tick",
        type=parse_duration_ms,
        default=10_000,
        metavar="DURATION",
        help="continuous: how often the system clock is given to every task (default 10s)",
    )
    run.add_argument(
        "--run-for",
        type=float,
        default=None,
        metavar="SECONDS",
        help="continuous: stop gracefully after this long (default: until SIGTERM or SIGINT)",
    )
    topology = parser.add_argument_group("topology")
    for option in options:
        topology.add_argument(
            "--" + option.name.replace("_", "-"),
            dest=option.name,
            type=option.parse,
            default=option.default,
            help=f"{option.help} (default {option.default})",
        )
    return parser


def run_cli(module: str, description: str, options: list[JobOption], argv: list[str] | None = None) -> int:
    """Parse the command line, run the job once, print the run summary as JSON. A user's mistake (see
    `errors`) ends the process with one line on stderr and exit status 2."""
    with exit_on_user_error():
        return _run(module, description, options, argv)


def _run(module: str, description: str, options: list[JobOption], argv: list[str] | None) -> int:
    import logging

    from spark_jobs.spark.session import local_spark_session, stop_session

    # Progress lines (one per micro-batch) go to stderr: the task log when Airflow runs the job.
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("spark_jobs").setLevel(logging.INFO)
    job_name = module.rsplit(".", 1)[-1]
    parser = build_parser(f"python -m {module}", description, options)
    args = parser.parse_args(argv)
    spec = JobSpec(module, {o.name: getattr(args, o.name) for o in options}, args.partitions)
    config = RunConfig(
        input_dir=parse_inputs(args.input, spec.input_topics),
        output_dir=args.output,
        checkpoint_dir=args.checkpoint,
        trigger=args.trigger,
        max_files_per_trigger=args.max_files_per_trigger,
        wall_clock_ms=args.wall_clock,
        processing_interval=args.processing_interval,
        wall_clock_tick_ms=args.wall_clock_tick,
        run_for_s=args.run_for,
        shuffle_partitions=args.shuffle_partitions,
        live_spark_tasks=args.live_spark_tasks,
    )
    check_run(spec, config)  # the user's mistakes that can be found before Spark starts
    spark = local_spark_session(job_name, master=args.master, shuffle_partitions=args.shuffle_partitions)
    try:
        summary = run_job(spark, spec, config, job_name)
    finally:
        stop_session(spark)
    print(json.dumps(summary.to_dict(), indent=2))
    sys.stdout.flush()
    return 0
