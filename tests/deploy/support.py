"""Helpers for the native deployment test: a throwaway PostgreSQL server and background processes.

PostgreSQL comes from Debian's packages (scripts/install_postgres.sh) and runs as the `postgres` user when
the tests run as root, because initdb refuses to run as root. Its data directory is a fresh folder in /tmp
(pytest's tmp folders are private to root, so the `postgres` user could not enter them); it listens on a
free loopback port only, and is stopped and deleted afterwards.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from spark_jobs.spark.cluster import free_port


def pg_binary(name: str) -> str:
    """`name` from PATH or from Debian's /usr/lib/postgresql/<version>/bin (newest version first)."""
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(
        glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), key=lambda p: int(p.split("/")[4]), reverse=True
    )
    if candidates:
        return candidates[0]
    pytest.fail(
        f"PostgreSQL's {name} was not found: run scripts/install_postgres.sh (Debian package postgresql)"
    )


@dataclass(frozen=True)
class PostgresServer:
    host: str
    port: int
    user: str
    password: str
    database: str
    data_dir: Path

    @property
    def sqlalchemy_url(self) -> str:
        return f"postgresql+psycopg2://{self.user}:{self.password}@{self.host}:{self.port}/{self.database}"

    def connect(self):
        import psycopg2

        return psycopg2.connect(
            host=self.host, port=self.port, user=self.user, password=self.password, dbname=self.database
        )


def _as_postgres_user(cmd: list[str]) -> list[str]:
    """Run `cmd` as the `postgres` system user when we are root (initdb refuses root)."""
    if os.geteuid() != 0:
        return cmd
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        pytest.fail("running as root but there is no `postgres` user: run scripts/install_postgres.sh")
    runuser = shutil.which("runuser")
    if runuser:
        return [runuser, "-u", "postgres", "--", *cmd]
    return ["su", "postgres", "-s", "/bin/sh", "-c", " ".join(map(repr, cmd))]


@contextlib.contextmanager
def postgres_server(database: str = "airflow", user: str = "airflow") -> Iterator[PostgresServer]:
    initdb, pg_ctl = pg_binary("initdb"), pg_binary("pg_ctl")
    root = Path(tempfile.mkdtemp(prefix="deploy-pg-"))
    data_dir, socket_dir, log_file = root / "data", root / "socket", root / "server.log"
    socket_dir.mkdir()
    superuser_password = secrets.token_urlsafe(16)
    (root / "pwfile").write_text(superuser_password + "\n")
    if os.geteuid() == 0:
        pw = pwd.getpwnam("postgres")
        for path in (root, socket_dir, root / "pwfile"):
            os.chown(path, pw.pw_uid, pw.pw_gid)
        root.chmod(0o700)
    port = free_port()
    started = False
    try:
        subprocess.run(
            _as_postgres_user(
                [
                    initdb,
                    "-D",
                    str(data_dir),
                    "-U",
                    "postgres",
                    "--pwfile",
                    str(root / "pwfile"),
                    "--auth-local",
                    "scram-sha-256",
                    "--auth-host",
                    "scram-sha-256",
                    "-E",
                    "UTF8",
                    "--no-instructions",
                ]
            ),  # fmt: skip
            check=True,
            capture_output=True,
            text=True,
            timeout=120,
        )
        options = (
            f"-c listen_addresses=127.0.0.1 -p {port} -k {socket_dir} -c fsync=off -c max_connections=200"
        )
        subprocess.run(
            _as_postgres_user(
                [pg_ctl, "-D", str(data_dir), "-l", str(log_file), "-o", options, "-w", "-t", "60", "start"]
            ),
            check=True,
            capture_output=True,
            text=True,
            timeout=90,
        )
        started = True
        import psycopg2

        password = secrets.token_urlsafe(16)
        admin = psycopg2.connect(
            host="127.0.0.1", port=port, user="postgres", password=superuser_password, dbname="postgres"
        )
        admin.autocommit = True
        with admin.cursor() as cur:
            cur.execute(f"CREATE ROLE {user} LOGIN PASSWORD %s", (password,))
            cur.execute(f"CREATE DATABASE {database} OWNER {user}")
        admin.close()
        yield PostgresServer("127.0.0.1", port, user, password, database, data_dir)
    except subprocess.CalledProcessError as exc:
        log = log_file.read_text() if log_file.exists() else ""
        pytest.fail(f"PostgreSQL did not start: {exc.cmd}\n{exc.stdout}\n{exc.stderr}\n{log[-3000:]}")
    finally:
        if started:
            subprocess.run(
                _as_postgres_user([pg_ctl, "-D", str(data_dir), "-m", "fast", "-w", "-t", "60", "stop"]),
                capture_output=True,
                timeout=90,
            )
        shutil.rmtree(root, ignore_errors=True)


# --------------------------------------------------------------------------------------------------------
# Background processes (Airflow components, Spark daemons): own process group, log file, clean stop
# --------------------------------------------------------------------------------------------------------


@dataclass
class Service:
    name: str
    proc: subprocess.Popen
    log: Path

    def tail(self, chars: int = 4000) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except FileNotFoundError:
            return ""

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, timeout: float = 30) -> None:
        if self.proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)


def start_service(
    name: str, cmd: list[str], env: dict[str, str], log_dir: Path, cwd: Path | None = None
) -> Service:
    log_dir.mkdir(parents=True, exist_ok=True)
    log = log_dir / f"{name}.log"
    with log.open("wb") as fh:
        proc = subprocess.Popen(
            cmd, env=env, cwd=cwd, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True
        )
    return Service(name, proc, log)


def wait_for(predicate, timeout: float, what: str, services: list[Service] = (), interval: float = 1.0):
    """Poll `predicate` until it returns a truthy value; fail early if a service died."""
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(Exception):
            result = predicate()
            if result:
                return result
        for svc in services:
            if not svc.alive():
                pytest.fail(
                    f"{svc.name} exited ({svc.proc.returncode}) while waiting for {what}:\n{svc.tail()}"
                )
        if time.monotonic() > deadline:
            logs = "\n".join(f"--- {s.name} ---\n{s.tail(2000)}" for s in services)
            pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}\n{logs}")
        time.sleep(interval)


def http_get(url: str, timeout: float = 5) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return resp.read()


def http_status(url: str, timeout: float = 5) -> int:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return resp.status
