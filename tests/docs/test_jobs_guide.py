"""docs/jobs.md's worked example, run as the page shows it.

The page marks its example's blocks with HTML comments: `<!-- guide: file PATH -->` (write the block to
PATH in the project folder), `<!-- guide: setup -->` (environment: runs before every later command
block) and `<!-- guide: run -->` (run it with bash in the project folder). The tests follow the page in
order, with `SPARK_JOBS` set to this checkout, as a new user would, and check that what the page says
came out did.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
GUIDE = REPO_ROOT / "docs" / "jobs.md"
MARKER = re.compile(r"^<!-- guide: (file (?P<path>\S+)|setup|run) -->$")


@dataclass(frozen=True)
class Step:
    kind: str  # file, setup or run
    text: str
    path: str | None = None


def guide_steps() -> list[Step]:
    """The marked blocks of the page, in order; a marker must be followed by a fenced block."""
    lines = GUIDE.read_text().splitlines()
    steps = []
    for i, line in enumerate(lines):
        match = MARKER.match(line)
        if not match:
            continue
        assert lines[i + 1].startswith("```"), f"jobs.md line {i + 2}: a marker must precede a fenced block"
        end = lines.index("```", i + 2)
        text = "\n".join(lines[i + 2 : end]) + "\n"
        kind = match.group(1).split()[0]
        steps.append(Step(kind, text, match.group("path")))
    return steps


def user_environment() -> dict[str, str]:
    """A shell as a user has it: no Airflow settings of this test session, SPARK_JOBS = this checkout."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW") and k != "PYTHONPATH"}
    env["SPARK_JOBS"] = str(REPO_ROOT)
    return env


class Follower:
    """Follows the page's steps in a project folder: writes its files, runs its commands."""

    def __init__(self, project: Path):
        self.project = project
        self.setup: list[str] = []
        self.outputs: list[str] = []

    def shell(self, text: str, timeout: float) -> subprocess.CompletedProcess:
        """`text` in bash in the project folder, after the page's setup blocks so far."""
        script = "set -euo pipefail\n" + "".join(self.setup) + text
        return subprocess.run(
            ["bash", "-c", script], cwd=self.project, env=user_environment(), stdin=subprocess.DEVNULL,
            capture_output=True, text=True, timeout=timeout,
        )  # fmt: skip

    def follow(self, step: Step, timeout: float = 1800) -> None:
        if step.kind == "file":
            target = self.project / step.path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(step.text)
        elif step.kind == "setup":
            self.setup.append(step.text)
        else:
            done = self.shell(step.text, timeout)
            output = done.stdout + done.stderr
            assert done.returncode == 0, f"the page's command failed:\n{step.text}\n{output[-8000:]}"
            self.outputs.append(done.stdout)


def shown_block_after(phrase: str) -> str:
    """The first unmarked fenced block after `phrase` on the page: output the page says a step prints."""
    text = GUIDE.read_text()
    start = text.index("```\n", text.index(phrase)) + len("```\n")
    return text[start : text.index("```", start)]


def test_every_marked_block_is_well_formed_and_the_job_module_declares_the_contract():
    steps = guide_steps()
    files = [s.path for s in steps if s.kind == "file"]
    assert files == [
        "shop_jobs/hourly_spend.py",
        "tests/test_hourly_spend.py",
        "make_purchases.py",
        "shop_jobs/hourly_spend_rules.json",
        "dags/shop_pipelines.py",
    ]
    for step in steps:
        if step.kind == "file" and step.path.endswith(".py"):
            compile(step.text, step.path, "exec")
        if step.kind == "file" and step.path.endswith(".json"):
            json.loads(step.text)


def test_the_readme_s_job_declares_the_contract_and_publishes_each_final_once(tmp_path, monkeypatch):
    """The ~20-line job of README.md, as printed there."""
    readme = (REPO_ROOT / "README.md").read_text()
    section = readme[readme.index("## A job") :]
    code = section[section.index("```python\n") + len("```python\n") : section.index("\n```\n")]
    package = tmp_path / "my_jobs"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "final_counts.py").write_text(code + "\n")
    monkeypatch.syspath_prepend(str(tmp_path))

    from spark_jobs.spark.job import JobContract
    from spark_jobs.streams import TopologyTestDriver

    contract = JobContract.of("my_jobs.final_counts")
    assert (contract.name, contract.input_topics, list(contract.output_topics)) == (
        "final_counts",
        ("readings",),
        ["finals"],
    )
    from my_jobs.final_counts import build_topology

    driver = TopologyTestDriver(build_topology(window_size=60_000, grace=0))
    readings = driver.create_input_topic("readings")
    for timestamp in (0, 10_000, 59_999, 60_000, 61_000, 130_000):
        readings.pipe_input("s1", 1.0, timestamp)
    finals = [
        (key.window.start, count)
        for key, count in driver.create_output_topic("finals").read_key_values_to_list()
    ]
    assert finals == [(0, 3), (60_000, 2)]


def test_the_unit_test_of_the_page_passes_on_the_page_s_job(tmp_path):
    """Steps 1 and 2: the job and its TopologyTestDriver test, without Spark."""
    follower = Follower(tmp_path)
    steps = guide_steps()
    upto = next(i for i, s in enumerate(steps) if s.kind == "run" and "pytest" in s.text)
    for step in steps[: upto + 1]:
        follower.follow(step, timeout=600)
    assert "1 passed" in follower.outputs[-1]


@pytest.mark.spark
@pytest.mark.airflow
@pytest.mark.slow
def test_the_worked_example_runs_on_spark_validates_and_its_dag_succeeds(tmp_path):
    """Every step: the unit test, the job on local Spark, validation, `airflow dags test` of its DAG.

    Minutes: three Spark runs (the job, its validation, then both again under Airflow).
    """
    project = tmp_path / "shop"
    project.mkdir()
    follower = Follower(project)
    for step in guide_steps():
        follower.follow(step)

    # Step 4: the run summary is the one the page shows.
    summary = json.loads((project / "summary.json").read_text())
    shown = shown_block_after("`summary.json` (also in `out/_runs/`) says:")
    assert json.loads("{" + shown.replace("\n", ",").rstrip(",") + "}") == {
        "records": summary["records"],
        "emitted": summary["emitted"],
    }
    quarantine = pd.read_parquet(project / "out" / "_quarantine")
    assert quarantine.reason.tolist() == ["unparseable JSON"]
    finals = pd.read_parquet(project / "out" / "spend-finals")
    hours = sorted(pd.to_datetime(finals.window_start.unique(), unit="ms", utc=True).strftime("%H:%M"))
    assert (len(finals), hours) == (40, ["10:00", "11:00"])

    # Step 4: other options on the same checkpoint are refused with the line the page shows.
    refused = follower.shell(
        "python -m shop_jobs.hourly_spend --input landing --output out --checkpoint ckpt --grace 5min", 600
    )
    shown = shown_block_after("checkpoint and a new output folder. With `--grace 5min`:")
    assert (refused.returncode, refused.stderr.strip().splitlines()[-1]) == (2, shown.strip())

    # Step 5: validation printed the verdicts the page shows, and every suite passed.
    validation = follower.outputs[-2]
    shown = shown_block_after("It prints one line per suite and exits 1 if any fails:")
    assert [line for line in validation.splitlines() if line.startswith(("PASSED", "FAILED"))] == [
        line for line in shown.splitlines() if line.startswith(("PASSED", "FAILED"))
    ]

    # Step 6: the DAG run succeeded, validated its output and updated the topics' Assets.
    airflow_output = follower.outputs[-1]
    assert "DagRun Finished: dag_id=hourly_spend_pipeline" in airflow_output
    assert "state=success" in airflow_output
    reports = project / "var" / "reports" / "hourly_spend"
    verdicts = json.loads((reports / "verdicts.json").read_text())
    assert verdicts["success"]
    assert {s["suite"] for s in verdicts["suites"]} == {
        "spend-updates",
        "spend-finals",
        "big-spenders",
        "quarantine",
        "late",
    }
    assert (reports / "data_docs" / "index.html").is_file()
    with sqlite3.connect(project / "var" / "airflow" / "airflow.db") as db:
        events = db.execute(
            "SELECT asset.name, asset_event.extra FROM asset_event JOIN asset ON asset.id = asset_event.asset_id"
        ).fetchall()
    extras = {name: json.loads(extra) for name, extra in events}
    assert set(extras) == {
        "hourly_spend/spend-updates",
        "hourly_spend/spend-finals",
        "hourly_spend/big-spenders",
    }
    assert extras["hourly_spend/spend-finals"]["rows"] == 40
    assert extras["hourly_spend/spend-finals"]["verdict"] == "passed"
