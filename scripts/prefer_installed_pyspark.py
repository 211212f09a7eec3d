"""Make Python workers import the installed pyspark instead of Spark's pyspark.zip.

Spark puts `$SPARK_HOME/python/lib/pyspark.zip` (and py4j's zip) first on the path of every Python process
it starts. For a pip-installed pyspark that zip holds the same files as the installed package
(check_pyspark.py vouches for them), but modules imported from a zip are compiled from source in every new
process: every Python worker pays that compilation of pyspark's worker modules, and again each streaming
query's driver-side worker. A `.pth` file next to the installed pyspark drops those two entries, and only
those, when an interpreter starts.

Run by scripts/setup.sh and the Docker image after pyspark is installed; idempotent.
"""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

PTH_NAME = "spark_jobs_installed_pyspark_first.pth"


def main() -> None:
    site = Path(metadata.distribution("pyspark").locate_file("")).resolve()
    zips = f"{site / 'pyspark' / 'python' / 'lib'}/"
    # Compared by real path: a venv reached through a symlink puts the zips on the path under either name.
    line = (
        "import os, sys; sys.path[:] = "
        f"[p for p in sys.path if not os.path.realpath(p).startswith({zips!r})]\n"
    )
    (site / PTH_NAME).write_text(line)
    print(f"workers import pyspark from {site} ({PTH_NAME})")


if __name__ == "__main__":
    main()
