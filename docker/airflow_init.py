"""One-shot initialisation of the deployment (the compose service `airflow-init`).

1. Refuses weak or malformed secrets, naming each one: compose's `${VAR:?}` only proves a variable is
   set, not that a Fernet key is a Fernet key.
2. Writes the SimpleAuthManager passwords file from AIRFLOW_ADMIN_PASSWORD, so the admin password is the
   one the operator chose instead of one Airflow generates and prints into the logs.
3. Migrates the metadata database (`airflow db migrate`), failing loudly if that fails, then adds the
   pipelines' Spark connection from SPARK_MASTER unless it exists (scripts/define_spark_connection.py).

Runs with the Airflow image's Python, and natively (tests/deploy uses it against a local PostgreSQL).
Exit codes: 0 done, 2 a secret is missing or invalid, other: `airflow db migrate` failed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

# Name -> minimum length. Every one of these must be set by the operator; none has a default.
REQUIRED_SECRETS: dict[str, int] = {
    "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": 1,
    "AIRFLOW__CORE__FERNET_KEY": 1,
    "AIRFLOW__API_AUTH__JWT_SECRET": 32,
    "AIRFLOW__API__SECRET_KEY": 32,
    "AIRFLOW_ADMIN_PASSWORD": 8,
}


def secret_problems(env: Mapping[str, str]) -> list[str]:
    """Everything wrong with the secrets in `env`, one message per variable; empty when all are fine."""
    problems = []
    for name, min_len in REQUIRED_SECRETS.items():
        value = env.get(name, "")
        if not value:
            problems.append(f"{name} is not set")
        elif len(value) < min_len:
            problems.append(f"{name} is too short ({len(value)} characters, at least {min_len})")
    fernet_key = env.get("AIRFLOW__CORE__FERNET_KEY", "")
    if fernet_key:
        from cryptography.fernet import Fernet

        try:
            Fernet(fernet_key)
        except (ValueError, TypeError):
            problems.append(
                "AIRFLOW__CORE__FERNET_KEY is not a Fernet key (32 url-safe base64-encoded bytes); generate one "
                'with: python -c "from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())"'
            )
    conn = env.get("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", "")
    if conn and conn.startswith("sqlite"):
        problems.append(
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN points at SQLite; this deployment needs PostgreSQL"
        )
    return problems


def admin_username(env: Mapping[str, str]) -> str:
    """The first user of AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS ("name:role,..."), `admin` by default."""
    users = env.get("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS", "admin:admin")
    return users.split(",")[0].split(":")[0].strip() or "admin"


def write_passwords_file(path: Path, username: str, password: str) -> None:
    """The SimpleAuthManager passwords file: {"username": "password"}, readable by owner and group only."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps({username: password}) + "\n")
    tmp.chmod(0o660)
    tmp.replace(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-migrate", action="store_true", help="check secrets and write files only")
    args = parser.parse_args(argv)

    problems = secret_problems(os.environ)
    if problems:
        print("airflow-init: refusing to start, fix these settings (docker/.env):", file=sys.stderr)
        for problem in problems:
            print(f"  - {problem}", file=sys.stderr)
        return 2

    passwords_file = os.environ.get("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE")
    if passwords_file:
        write_passwords_file(
            Path(passwords_file), admin_username(os.environ), os.environ["AIRFLOW_ADMIN_PASSWORD"]
        )
        print(f"airflow-init: admin user '{admin_username(os.environ)}' written to {passwords_file}")

    if args.skip_migrate:
        return 0
    print("airflow-init: migrating the metadata database", flush=True)
    migrated = subprocess.run(["airflow", "db", "migrate"], check=False).returncode
    if migrated != 0:
        return migrated
    # The pipelines' Spark connection, from SPARK_MASTER, unless one exists (then it is kept as edited).
    define = Path(__file__).resolve().parents[1] / "scripts" / "define_spark_connection.py"
    return subprocess.run([sys.executable, str(define)], check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
