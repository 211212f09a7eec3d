"""The Spark benchmark's memory figures (bench/spark_bench.py): the peak summed RSS and PSS of a process
tree, split by kind of process, as `timed_process` records them."""

from __future__ import annotations

import os
import shlex
import sys

import pytest

from bench import spark_bench

pytestmark = pytest.mark.skipif(
    not os.path.exists("/proc/self/smaps_rollup"), reason="PSS is read from Linux's smaps_rollup"
)

# A parent that allocates 64 MB, forks a child sharing them copy on write, and both wait: summed RSS
# counts those pages once per process, summed PSS once.
PARENT_AND_FORKED_CHILD = """
import os, sys, time
block = bytearray(64 * 2**20)
for i in range(0, len(block), 4096):
    block[i] = 1
if os.fork() == 0:
    time.sleep(2.5)
    os._exit(0)
time.sleep(3)
print('{"seconds": 3, "events": 6}')
"""


def test_the_pss_of_a_process_is_between_nothing_and_its_rss():
    pss = spark_bench.proportional_set_size(os.getpid())
    rss = spark_bench.psutil.Process().memory_info().rss
    assert pss is not None and 0 < pss <= rss
    assert spark_bench.proportional_set_size(2**22 + 1) is None  # no such process


def test_a_tree_sharing_pages_copy_on_write_peaks_lower_in_pss_than_in_rss(tmp_path):
    result = spark_bench.timed_process(
        [sys.executable, "-c", PARENT_AND_FORKED_CHILD], tmp_path / "scratch", None, "forked"
    )
    assert result["events"] == 6 and result["events_per_s"] > 0
    assert result["most_processes"] == {"driver": 1, "python_workers": 1}
    by_rss, by_pss = result["peak_rss_mb_by_process"], result["peak_pss_mb_by_process"]
    assert set(by_rss) == set(by_pss) == {"driver", "python_workers"}
    assert by_rss["driver"] >= 64 and by_rss["python_workers"] >= 64  # each counts the shared block
    assert result["peak_rss_mb"] >= 128
    # Counted once, the shared block leaves the summed PSS at least 32 MB under the summed RSS.
    assert result["peak_pss_mb"] <= result["peak_rss_mb"] - 32
    assert result["peak_pss_mb"] >= 64


def test_every_side_runs_with_the_jvm_heap_and_options_given(monkeypatch, tmp_path):
    commands = []
    monkeypatch.setattr(spark_bench, "timed_process", lambda command, *rest: commands.append(command) or {})
    options = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"
    args = spark_bench.parse_args(["--driver-memory", "600m", f"--java-options={options}"])
    for side in spark_bench.SIDES:
        spark_bench.run_in_own_process(side, "count", tmp_path, args)
    assert len(commands) == len(spark_bench.SIDES)
    for command in commands:
        one = spark_bench.parse_args(command[2:])
        assert (one.driver_memory, one.java_options) == ("600m", options)
    defaults = spark_bench.parse_args([])
    assert (defaults.driver_memory, defaults.java_options) == (spark_bench.DRIVER_MEMORY, "")


def test_a_run_hands_its_heap_and_jvm_options_to_spark_submit():
    assert shlex.split(spark_bench.submit_args("512m", "")) == ["--driver-memory", "512m", "pyspark-shell"]
    assert shlex.split(spark_bench.submit_args("512m", "-XX:+UseSerialGC -Xss1m")) == [
        "--driver-memory",
        "512m",
        "--driver-java-options",
        "-XX:+UseSerialGC -Xss1m",
        "pyspark-shell",
    ]


class _Process:
    def __init__(self, pid, name, parent, cmdline=()):
        self.pid, self._name, self._parent, self._cmdline = pid, name, parent, list(cmdline)

    def name(self):
        return self._name

    def ppid(self):
        return self._parent

    def cmdline(self):
        return self._cmdline


def test_the_python_children_of_the_jvm_are_told_apart(monkeypatch):
    """The daemon that forks the workers and the process in which the driver names a stateful processor's
    state variables are both Python children of the JVM: they may run at the same time, and are two roles."""
    tree = {
        1: _Process(1, "python", 0),
        2: _Process(2, "java", 1),
        3: _Process(3, "python", 2, ["python", "-m", "pyspark.daemon", "pyspark.worker"]),
        4: _Process(4, "python", 3, ["python", "-m", "pyspark.daemon", "pyspark.worker"]),
        5: _Process(
            5, "python", 2, ["python", "-m", "pyspark.sql.streaming.transform_with_state_driver_worker"]
        ),
        6: _Process(6, "chmod", 2, ["chmod", "644", "x"]),
    }
    monkeypatch.setattr(spark_bench.psutil, "Process", lambda pid: tree[pid])
    roles = {pid: spark_bench.process_role(process, tree[1]) for pid, process in tree.items()}
    assert roles == {
        1: "driver",
        2: "jvm",
        3: "python_daemon",
        4: "python_workers",
        5: "python_driver_worker",
        6: None,
    }
