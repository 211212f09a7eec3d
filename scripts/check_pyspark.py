"""Fail unless the installed pyspark is whole: every file it installed still has its recorded hash.

`apache-airflow-providers-apache-spark` depends on `pyspark-client`, which installs into the same
`pyspark/` folder and silently replaces some of pyspark's Python files; jobs then fail with Py4J
constructor errors. Comparing against pyspark's own RECORD catches that in a second, before any job runs.
"""

from __future__ import annotations

import base64
import hashlib
import sys
from importlib import metadata


def overwritten_files() -> list[str]:
    dist = metadata.distribution("pyspark")
    changed = []
    for entry in dist.files or []:
        if entry.hash is None or not str(entry).endswith(".py"):
            continue
        path = entry.locate()
        try:
            digest = hashlib.new(entry.hash.mode, path.read_bytes()).digest()
        except FileNotFoundError:
            changed.append(f"{entry} (missing)")
            continue
        if base64.urlsafe_b64encode(digest).rstrip(b"=").decode() != entry.hash.value:
            changed.append(str(entry))
    return changed


def main() -> int:
    changed = overwritten_files()
    if changed:
        print(
            f"pyspark is damaged: {len(changed)} of its files were overwritten (e.g. {changed[0]}), "
            "probably by pyspark-client. Fix: pip install --force-reinstall --no-deps "
            f"pyspark=={metadata.version('pyspark')}",
            file=sys.stderr,
        )
        return 1
    import pyspark  # noqa: F401  (the import itself is part of the check)

    print(f"pyspark {metadata.version('pyspark')} intact")
    return 0


if __name__ == "__main__":
    sys.exit(main())
