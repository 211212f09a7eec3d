"""A throwaway standalone Spark cluster on 127.0.0.1, started from the pyspark package (tests, demos).

    with StandaloneCluster.start(workers=2) as cluster:
        run_something(master=cluster.master_url)
        cluster.applications()          # from the master's JSON state

Every process gets free ports and its own work and log directories, and runs in its own process
group, so `stop()` ends exactly the processes this object started.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

HOST = "127.0.0.1"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def spark_class() -> str:
    from pyspark.find_spark_home import _find_spark_home

    return str(Path(_find_spark_home()) / "bin" / "spark-class")


@dataclass
class StandaloneCluster:
    master_url: str
    webui_url: str
    work_dir: Path
    processes: list[subprocess.Popen] = field(default_factory=list)

    @classmethod
    def start(
        cls,
        workers: int = 2,
        cores: int = 1,
        memory: str = "1g",
        work_dir: str | os.PathLike | None = None,
        timeout_s: float = 180,
    ) -> StandaloneCluster:
        work = Path(work_dir or tempfile.mkdtemp(prefix="spark-cluster-"))
        work.mkdir(parents=True, exist_ok=True)
        port, webui = free_port(), free_port()
        cluster = cls(f"spark://{HOST}:{port}", f"http://{HOST}:{webui}", work)
        try:
            cluster._launch(
                "master",
                [
                    "org.apache.spark.deploy.master.Master",
                    "--host",
                    HOST,
                    "--port",
                    str(port),
                    "--webui-port",
                    str(webui),
                ],
            )
            cluster._wait(lambda state: state.get("status") == "ALIVE", timeout_s, "master to be ALIVE")
            for i in range(workers):
                cluster._launch(
                    f"worker-{i}",
                    [
                        "org.apache.spark.deploy.worker.Worker",
                        cluster.master_url,
                        "--host",
                        HOST,
                        "--port",
                        str(free_port()),
                        "--webui-port",
                        str(free_port()),
                        "--cores",
                        str(cores),
                        "--memory",
                        memory,
                        "--work-dir",
                        str(work / f"worker-{i}"),
                    ],
                )
            cluster._wait(
                lambda state: state.get("aliveworkers", 0) >= workers, timeout_s, f"{workers} alive workers"
            )
        except BaseException:
            cluster.stop()
            raise
        return cluster

    def _launch(self, name: str, args: list[str]) -> None:
        env = dict(os.environ, SPARK_LOCAL_IP=HOST, SPARK_LOG_DIR=str(self.work_dir / "logs"))
        log = open(self.work_dir / f"{name}.log", "wb")  # noqa: SIM115 (kept open for the process' lifetime)
        self.processes.append(
            subprocess.Popen(
                [spark_class(), *args], stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        )
        log.close()  # the child holds its own descriptor

    def state(self) -> dict:
        """The master's JSON state: workers, `activeapps`, `completedapps`, ..."""
        with urllib.request.urlopen(f"{self.webui_url}/json/", timeout=5) as response:
            return json.load(response)

    def applications(self) -> list[dict]:
        state = self.state()
        return list(state.get("activeapps", [])) + list(state.get("completedapps", []))

    def _wait(self, ready, timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for process in self.processes:
                if process.poll() is not None:
                    raise RuntimeError(
                        f"a cluster process exited with {process.returncode}; logs in {self.work_dir}"
                    )
            try:
                if ready(self.state()):
                    return
            except (urllib.error.URLError, ConnectionError, TimeoutError, json.JSONDecodeError):
                pass
            time.sleep(0.5)
        raise TimeoutError(f"timed out after {timeout_s}s waiting for {what}; logs in {self.work_dir}")

    def stop(self, timeout_s: float = 30) -> None:
        """SIGTERM each process group we started (workers first), then SIGKILL what is left."""
        for process in reversed(self.processes):
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        for process in reversed(self.processes):
            try:
                process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        self.processes.clear()

    def __enter__(self) -> StandaloneCluster:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
