"""The task state of a job's checkpoint as a table, without running the job.

    python -m spark_jobs.state --checkpoint DIR [--batch N] [--output FILE.parquet|FILE.csv]

One row per entry of every task's stores at the latest committed micro-batch (or batch N): `node`, `store`,
`partition`, `key`, `window_start`, `window_end`, `value` (JSON text), `timestamp`
(`spark_jobs.spark.state`). Without `--output` it prints a summary per node and the first rows.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from spark_jobs.spark.errors import ArgumentParser, UserError, exit_on_user_error

FORMATS = (".parquet", ".csv")
FIRST_ROWS = 10


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(prog="python -m spark_jobs.state", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--checkpoint", required=True, help="the job's checkpoint folder (--checkpoint of its run)"
    )
    parser.add_argument(
        "--batch", type=int, default=None, metavar="N", help="a committed batch (default: the latest)"
    )
    parser.add_argument(
        "--output", default=None, metavar="FILE", help="write the table to FILE.parquet or FILE.csv instead"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Print or write the table; a user's mistake (`spark_jobs.spark.errors`) is one line and exit 2."""
    with exit_on_user_error():
        return _main(argv)


def _main(argv: list[str] | None) -> int:
    args = build_parser().parse_args(argv)
    output = None if args.output is None else Path(args.output)
    if output is not None and output.suffix.lower() not in FORMATS:
        raise UserError(f"--output {output}: write a .parquet or a .csv file")
    from spark_jobs.spark.state import read_state_and_sizes, summary

    frame, node_bytes = read_state_and_sizes(args.checkpoint, args.batch)  # StateReadError: a UserError
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        if output.suffix.lower() == ".parquet":
            frame.to_parquet(output, index=False)
        else:
            frame.to_csv(output, index=False)
        print(f"{len(frame)} entries of {frame['partition'].nunique()} tasks written to {output}")
        return 0
    print(summary(frame, node_bytes).to_string(index=False))
    print()
    print(f"{len(frame)} entries; the first {min(FIRST_ROWS, len(frame))}:")
    print(frame.head(FIRST_ROWS).to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
