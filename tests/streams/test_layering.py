"""The engine (`spark_jobs.streams`) is pure Python plus numpy: it imports neither pyspark nor airflow (the
Spark runtime adapts it; DAGs and plugins orchestrate it)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path


def test_the_engine_imports_no_third_party_package_but_numpy() -> None:
    probe = (
        "import sys, spark_jobs.streams, spark_jobs.streams.testing\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} - set(sys.stdlib_module_names)))"
    )
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=root
    ).stdout
    third_party = {name for name in ast.literal_eval(out) if not name.startswith("_")} - {"spark_jobs"}
    assert third_party == {"numpy"}
