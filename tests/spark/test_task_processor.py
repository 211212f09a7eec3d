"""The stateful processor stays light to unpickle: Spark's driver does it at every query start."""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path

from spark_jobs.spark.job import JobSpec
from spark_jobs.spark.task_processor import TaskProcessor

_UNPICKLE = """
import pickle, sys
processor = pickle.loads(sys.stdin.buffer.read())
assert type(processor).__name__ == "TaskProcessor", processor
heavy = ("pandas", "pyarrow", "numpy", "spark_jobs.streams", "spark_jobs.spark.runtime", "spark_jobs.spark.landing")
heavy = sorted(m for m in heavy if m in sys.modules)
print(",".join(heavy))
"""


def test_unpickling_the_processor_imports_neither_pandas_pyarrow_numpy_nor_the_engine():
    processor = TaskProcessor(
        JobSpec("spark_jobs.jobs.window_finals", {}, 4), "checkpoint-id", 1 << 20, "out"
    )
    done = subprocess.run(
        [sys.executable, "-c", _UNPICKLE],
        input=pickle.dumps(processor),
        capture_output=True,
        check=True,
        cwd=Path(__file__).resolve().parents[2],  # where spark_jobs is importable
    )
    assert done.stdout.decode().strip() == ""
