"""docker/docker-compose.yaml and docker/Dockerfile, checked without a Docker engine.

Two independent readers of the compose file:
- `docker compose config` (when the Compose v2 CLI plugin is installed: scripts/install_compose_cli.sh):
  Compose's own parser, interpolation and model; it rejects unset required variables, missing env files and
  undefined volumes, but NOT missing build contexts, Dockerfiles or bind-mounted host paths.
- PyYAML plus the checks in this file (always): interpolation with `${VAR:?}` semantics, and every file a
  service refers to (build context, Dockerfile and the sources of its COPY/ADD lines, bind-mounted host
  paths, env files) must exist.
The same file checks also run on the model printed by `docker compose config`.

Each check is proved able to fail: corrupted copies of the compose file in a tmp dir (a missing file of
each kind, an unset required secret) must be rejected, while the uncorrupted copy passes.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
DOCKER_DIR = REPO_ROOT / "docker"
COMPOSE_FILE = DOCKER_DIR / "docker-compose.yaml"
ENV_EXAMPLE = DOCKER_DIR / ".env.example"

# The secrets the stack must refuse to start without (the list, plus the API secret key).
REQUIRED_SECRETS = {
    "POSTGRES_PASSWORD",
    "AIRFLOW__CORE__FERNET_KEY",
    "AIRFLOW__API_AUTH__JWT_SECRET",
    "AIRFLOW__API__SECRET_KEY",
    "AIRFLOW_ADMIN_PASSWORD",
}
# Values for tests only; the Fernet key is a valid one so the init script's checks pass too.
TEST_SECRETS = {
    "POSTGRES_PASSWORD": "test-postgres-password",
    "AIRFLOW__CORE__FERNET_KEY": "kOdmUeWOHHcYu3R3uzr0_Vg5q5sHLVD5uRdsKIq1yVc=",
    "AIRFLOW__API_AUTH__JWT_SECRET": "test-jwt-secret-0123456789abcdef0123456789",
    "AIRFLOW__API__SECRET_KEY": "test-api-secret-0123456789abcdef0123456789",
    "AIRFLOW_ADMIN_PASSWORD": "test-admin-password",
}
LONG_RUNNING = {
    "postgres",
    "airflow-apiserver",
    "airflow-scheduler",
    "airflow-dag-processor",
    "airflow-triggerer",
    "spark-master",
    "spark-worker",
}

# ${NAME}, ${NAME:-default}, ${NAME-default}, ${NAME:?err}, ${NAME?err}, ${NAME:+alt}, and bare $NAME.
_VAR = re.compile(
    r"\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?+])(?P<arg>[^}]*))?\}|\$(?P<bare>[A-Za-z_][A-Za-z0-9_]*)"
)


# ----------------------------------------------------------------------------------------------------------
# Checker 1: PyYAML + own interpolation
# ----------------------------------------------------------------------------------------------------------


class InterpolationError(ValueError):
    pass


def interpolate(value: str, env: Mapping[str, str], where: str) -> str:
    """Compose's interpolation of one string; `$$` is a literal `$`. Raises on an unset required variable."""
    out = []
    for i, chunk in enumerate(value.split("$$")):
        if i:
            out.append("$")

        def sub(m: re.Match) -> str:
            name = m.group("name") or m.group("bare")
            op, arg = m.group("op"), m.group("arg")
            val = env.get(name)
            if op in (":?", "?"):
                if val is None or (op == ":?" and val == ""):
                    raise InterpolationError(f"{where}: required variable {name} is missing a value: {arg}")
                return val
            if op in (":-", "-"):
                return arg if val is None or (op == ":-" and val == "") else val
            if op in (":+", "+"):
                return arg if val else ""
            return val or ""

        out.append(_VAR.sub(sub, chunk))
    return "".join(out)


def interpolate_tree(node, env: Mapping[str, str], where: str, errors: list[str]):
    if isinstance(node, str):
        try:
            return interpolate(node, env, where)
        except InterpolationError as exc:
            errors.append(str(exc))
            return node
    if isinstance(node, list):
        return [interpolate_tree(v, env, f"{where}[{i}]", errors) for i, v in enumerate(node)]
    if isinstance(node, dict):
        return {k: interpolate_tree(v, env, f"{where}.{k}", errors) for k, v in node.items()}
    return node


def _strings(node):
    if isinstance(node, str):
        yield node
    elif isinstance(node, list):
        for v in node:
            yield from _strings(v)
    elif isinstance(node, dict):
        for k, v in node.items():
            yield from _strings(k)
            yield from _strings(v)


def referenced_variables(compose_file: Path) -> dict[str, set[str]]:
    """Every variable the compose file's values use (comments excluded), with its operators ('' for plain)."""
    found: dict[str, set[str]] = {}
    for text in _strings(yaml.safe_load(compose_file.read_text())):
        for chunk in text.split("$$"):
            for m in _VAR.finditer(chunk):
                name = m.group("name") or m.group("bare")
                found.setdefault(name, set()).add(m.group("op") or "")
    return found


def _is_host_path(source: str) -> bool:
    return source.startswith((".", "/", "~"))


def _volume_mounts(service: dict) -> list[tuple[str, str]]:
    """(type, source) of each volume entry, short or long syntax."""
    mounts = []
    for vol in service.get("volumes") or []:
        if isinstance(vol, str):
            source = vol.split(":", 1)[0] if ":" in vol else ""
            if source:
                mounts.append(("bind" if _is_host_path(source) else "volume", source))
        elif isinstance(vol, dict):
            mounts.append((vol.get("type", "volume"), vol.get("source", "")))
    return mounts


def _env_files(service: dict) -> list[tuple[str, bool]]:
    entries = service.get("env_file") or []
    if isinstance(entries, (str, dict)):
        entries = [entries]
    out = []
    for entry in entries:
        if isinstance(entry, str):
            out.append((entry, True))
        else:
            out.append((entry["path"], bool(entry.get("required", True))))
    return out


def dockerfile_sources(dockerfile: Path) -> list[str]:
    """Sources of the COPY/ADD instructions that read the build context (not --from=stage, not URLs)."""
    text = dockerfile.read_text()
    text = re.sub(r"\\\n", " ", text)  # join continuation lines
    sources = []
    for line in text.splitlines():
        parts = line.strip().split()
        if not parts or parts[0].upper() not in ("COPY", "ADD"):
            continue
        args = parts[1:]
        if any(a.startswith("--from") for a in args):
            continue
        args = [a for a in args if not a.startswith("--")]
        if args and args[0].startswith("["):
            args = json.loads(" ".join(args))
        for src in args[:-1]:
            if not re.match(r"^[a-z]+://", src):
                sources.append(src)
    return sources


def check_files(services: dict, base: Path, top_volumes: Mapping | None) -> list[str]:
    """Every file a service refers to must exist. `base` resolves relative paths (the compose file's folder)."""
    problems = []

    def resolve(p: str, rel_to: Path) -> Path:
        path = Path(os.path.expanduser(p))
        return path if path.is_absolute() else (rel_to / path).resolve()

    for name, svc in services.items():
        build = svc.get("build")
        if build is not None:
            if isinstance(build, str):
                build = {"context": build}
            context = resolve(build.get("context", "."), base)
            if not context.is_dir():
                problems.append(f"service {name}: build context {context} does not exist")
            else:
                dockerfile = resolve(build.get("dockerfile", "Dockerfile"), context)
                if not dockerfile.is_file():
                    problems.append(f"service {name}: Dockerfile {dockerfile} does not exist")
                else:
                    for src in dockerfile_sources(dockerfile):
                        if (
                            not any(context.glob(src.lstrip("/")))
                            and not (context / src.lstrip("/")).exists()
                        ):
                            problems.append(
                                f"service {name}: {dockerfile.name} copies {src}, missing from {context}"
                            )
        for kind, source in _volume_mounts(svc):
            if kind == "bind":
                path = resolve(source, base)
                if not path.exists():
                    problems.append(f"service {name}: bind-mounted host path {path} does not exist")
            elif kind == "volume" and top_volumes is not None and source not in top_volumes:
                problems.append(f"service {name}: named volume {source} is not declared under volumes:")
        for path, required in _env_files(svc):
            if required and not resolve(path, base).is_file():
                problems.append(f"service {name}: env file {resolve(path, base)} does not exist")
        for dep in svc.get("depends_on") or []:
            if dep not in services:
                problems.append(f"service {name}: depends on undefined service {dep}")
    return problems


def yaml_problems(compose_file: Path, env: Mapping[str, str]) -> list[str]:
    """Checker 1: PyYAML (anchors and merge keys resolved by the loader), own interpolation, file checks."""
    raw = yaml.safe_load(compose_file.read_text())
    if not isinstance(raw, dict) or not isinstance(raw.get("services"), dict):
        return [f"{compose_file}: no services mapping"]
    errors: list[str] = []
    services = {
        name: interpolate_tree(svc, env, f"services.{name}", errors) for name, svc in raw["services"].items()
    }
    return errors + check_files(services, compose_file.parent, raw.get("volumes") or {})


# ----------------------------------------------------------------------------------------------------------
# Checker 2: `docker compose config`
# ----------------------------------------------------------------------------------------------------------


def compose_cli_available() -> bool:
    if shutil.which("docker") is None:
        return False
    return subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0


def clean_env(secrets: Mapping[str, str]) -> dict[str, str]:
    """The caller's environment without any compose or stack variable, plus `secrets`."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k in ("PATH", "HOME", "DOCKER_CONFIG", "LANG", "LC_ALL", "TMPDIR", "USER")
    }
    env.update(secrets)
    return env


def compose_config(compose_file: Path, env: Mapping[str, str], empty_env_file: Path):
    """`docker compose config --format json` with exactly `env` (the developer's docker/.env is not read)."""
    return subprocess.run(
        [
            "docker",
            "compose",
            "-f",
            str(compose_file),
            "--env-file",
            str(empty_env_file),
            "config",
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        env=dict(env),
        timeout=60,
    )


def cli_problems(compose_file: Path, env: Mapping[str, str], empty_env_file: Path) -> list[str]:
    """Checker 2: Compose's own verdict, then the file checks on Compose's normalised (absolute-path) model."""
    proc = compose_config(compose_file, env, empty_env_file)
    if proc.returncode != 0:
        return [f"docker compose config failed: {proc.stderr.strip()}"]
    model = json.loads(proc.stdout)
    return check_files(model["services"], compose_file.parent, model.get("volumes") or {})


# ----------------------------------------------------------------------------------------------------------
# Fixtures
# ----------------------------------------------------------------------------------------------------------


@pytest.fixture
def empty_env_file(tmp_path) -> Path:
    path = tmp_path / "empty.env"
    path.write_text("")
    return path


@pytest.fixture
def needs_cli():
    if not compose_cli_available():
        pytest.skip("the Docker Compose v2 CLI is not installed (scripts/install_compose_cli.sh installs it)")


@pytest.fixture
def relocated_compose(tmp_path):
    """A copy of the compose file in a tmp dir, with its relative paths made absolute: it must pass as is."""

    def make(text_edit=lambda t: t) -> Path:
        text = COMPOSE_FILE.read_text()
        text = text.replace("context: ..", f"context: {REPO_ROOT}").replace("- ../", f"- {REPO_ROOT}/")
        assert "../" not in text, "a relative path was left in the relocated copy"
        target = tmp_path / "compose" / "docker-compose.yaml"
        target.parent.mkdir(exist_ok=True)
        target.write_text(text_edit(text))
        return target

    return make


def _replace_once(old: str, new: str):
    def edit(text: str) -> str:
        assert old in text, f"corruption target {old!r} not in the compose file"
        return text.replace(old, new, 1)

    return edit


# Each corruption breaks exactly one reference; both checkers must reject every one of them.
CORRUPTIONS = {
    "missing Dockerfile": _replace_once(
        "dockerfile: docker/Dockerfile", "dockerfile: docker/Dockerfile.missing"
    ),
    "missing build context": _replace_once("context: ", "context: /nonexistent/build-context/"),
    "missing bind-mounted host path": lambda t: t.replace(f"- {REPO_ROOT}/dags:", "- /nonexistent/dags:"),
    "missing env file": _replace_once(
        "    command: dag-processor\n", "    command: dag-processor\n    env_file: [missing.env]\n"
    ),
    "undeclared named volume": _replace_once("- postgres-db:/var", "- undeclared-volume:/var"),
    "new unset required secret": _replace_once(
        "    command: triggerer\n",
        "    command: triggerer\n    environment:\n      NEW_TOKEN: ${NEW_SECRET_TOKEN:?set NEW_SECRET_TOKEN}\n",
    ),
}


# ----------------------------------------------------------------------------------------------------------
# The real compose file
# ----------------------------------------------------------------------------------------------------------


def test_compose_file_passes_pyyaml_checks():
    assert yaml_problems(COMPOSE_FILE, TEST_SECRETS) == []


def test_compose_file_passes_docker_compose_config(needs_cli, empty_env_file):
    assert cli_problems(COMPOSE_FILE, clean_env(TEST_SECRETS), empty_env_file) == []


def yaml_model(compose_file: Path, env: Mapping[str, str]) -> dict:
    """The services as PyYAML + interpolation see them, in the shapes `docker compose config` prints:
    commands as lists, volumes as {type, source, target}, depends_on as {service: {condition}}."""
    errors: list[str] = []
    raw = yaml.safe_load(compose_file.read_text())
    services = {n: interpolate_tree(svc, env, n, errors) for n, svc in raw["services"].items()}
    assert not errors, errors
    for svc in services.values():
        if isinstance(svc.get("command"), str):
            svc["command"] = svc["command"].split()
        volumes = []
        for vol in svc.get("volumes") or []:
            if isinstance(vol, str):
                source, target = vol.split(":")[:2]
                vol = {
                    "type": "bind" if _is_host_path(source) else "volume",
                    "source": source,
                    "target": target,
                }
            volumes.append(vol)
        svc["volumes"] = volumes
        deps = svc.get("depends_on") or {}
        if isinstance(deps, list):
            deps = {d: {"condition": "service_started"} for d in deps}
        svc["depends_on"] = deps
        if "deploy" in svc and "replicas" in svc["deploy"]:
            svc["deploy"]["replicas"] = int(svc["deploy"]["replicas"])
    return services


@pytest.mark.parametrize("reader", ["pyyaml", "docker compose config"])
def test_topology_services_health_checks_and_shared_volumes(reader, empty_env_file):
    if reader == "pyyaml":
        services = yaml_model(COMPOSE_FILE, TEST_SECRETS)
    else:
        if not compose_cli_available():
            pytest.skip(
                "the Docker Compose v2 CLI is not installed (scripts/install_compose_cli.sh installs it)"
            )
        proc = compose_config(COMPOSE_FILE, clean_env(TEST_SECRETS), empty_env_file)
        assert proc.returncode == 0, proc.stderr
        services = json.loads(proc.stdout)["services"]
    assert set(services) >= LONG_RUNNING
    for name in LONG_RUNNING:
        assert services[name].get("healthcheck", {}).get("test"), f"{name} has no health check"
    assert services["spark-worker"]["deploy"]["replicas"] == 2
    assert services["postgres"]["image"].startswith("postgres:")
    commands = {name: " ".join(services[name]["command"]) for name in LONG_RUNNING - {"postgres"}}
    assert commands["airflow-apiserver"] == "api-server"
    assert commands["airflow-scheduler"] == "scheduler"
    assert commands["airflow-dag-processor"] == "dag-processor"
    assert commands["airflow-triggerer"] == "triggerer"
    assert "deploy.master.Master" in commands["spark-master"]
    assert (
        "deploy.worker.Worker" in commands["spark-worker"]
        and "spark://spark-master:7077" in commands["spark-worker"]
    )
    assert services["airflow-apiserver"]["healthcheck"]["test"][-1].endswith("/api/v2/monitor/health")

    def targets(name):
        return {
            v["target"]: v.get("source") for v in services[name].get("volumes", []) if v["type"] == "volume"
        }

    shared = ["/opt/spark-jobs/var/data", "/opt/spark-jobs/var/checkpoints", "/opt/spark-jobs/var/reports"]
    for name in ("airflow-scheduler", "spark-master", "spark-worker"):
        for target in shared:
            assert targets(name).get(target) == targets("airflow-scheduler")[target], (name, target)
    env = services["airflow-scheduler"]["environment"]
    assert env["AIRFLOW__CORE__EXECUTOR"] == "LocalExecutor"
    assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].startswith("postgresql+psycopg2://")
    assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].endswith("@postgres:5432/airflow")
    for secret in REQUIRED_SECRETS - {"AIRFLOW_ADMIN_PASSWORD", "POSTGRES_PASSWORD"}:
        assert env[secret] == TEST_SECRETS[secret]
    # The admin password reaches only the one-shot init service.
    assert (
        services["airflow-init"]["environment"]["AIRFLOW_ADMIN_PASSWORD"]
        == TEST_SECRETS["AIRFLOW_ADMIN_PASSWORD"]
    )
    assert all("AIRFLOW_ADMIN_PASSWORD" not in services[n].get("environment", {}) for n in LONG_RUNNING)
    # Every Airflow component waits for a successful init (secrets checked, DB migrated).
    for name in ("airflow-apiserver", "airflow-scheduler", "airflow-dag-processor", "airflow-triggerer"):
        assert services[name]["depends_on"]["airflow-init"]["condition"] == "service_completed_successfully"


def test_every_secret_is_required_and_has_no_default():
    variables = referenced_variables(COMPOSE_FILE)
    for secret in REQUIRED_SECRETS:
        assert variables.get(secret) == {":?"}, f"{secret} must only appear as ${{{secret}:?message}}"
    required = {name for name, ops in variables.items() if ops & {":?", "?"}}
    assert required == REQUIRED_SECRETS
    # No literal credential anywhere: every password/secret/key-named setting is an interpolation.
    raw = yaml.safe_load(COMPOSE_FILE.read_text())
    for name, svc in raw["services"].items():
        env = svc.get("environment") or {}
        for key, value in env.items():
            if re.search(r"PASSWORD|SECRET|FERNET", key) and not key.endswith("_FILE"):
                assert isinstance(value, str) and "${" in value, f"{name}: {key} has a literal value"


@pytest.mark.parametrize("secret", sorted(REQUIRED_SECRETS))
def test_each_unset_secret_is_refused_and_named(secret, empty_env_file):
    secrets = {k: v for k, v in TEST_SECRETS.items() if k != secret}
    problems = yaml_problems(COMPOSE_FILE, secrets)
    assert problems and all(secret in p for p in problems), problems
    empty = yaml_problems(COMPOSE_FILE, {**secrets, secret: ""})
    assert empty and all(secret in p for p in empty), "an empty value must count as unset"
    if compose_cli_available():
        proc = compose_config(COMPOSE_FILE, clean_env(secrets), empty_env_file)
        assert proc.returncode != 0
        assert secret in proc.stderr and "docker/.env" in proc.stderr, proc.stderr


def test_env_example_lists_every_variable_without_values():
    lines = [ln.strip() for ln in ENV_EXAMPLE.read_text().splitlines()]
    assigned = {}
    commented = set()
    for ln in lines:
        m = re.match(r"^(#\s*)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$", ln)
        if m:
            if m.group(1):
                commented.add(m.group(2))
            else:
                assigned[m.group(2)] = m.group(3)
    assert set(assigned) == REQUIRED_SECRETS, "the required names are exactly the uncommented ones"
    assert all(value == "" for value in assigned.values()), ".env.example must not carry values"
    assert set(referenced_variables(COMPOSE_FILE)) == set(assigned) | commented


def test_dockerfile_pins_base_java_and_pyspark_reinstall():
    text = (DOCKER_DIR / "Dockerfile").read_text()
    assert re.search(r"^ARG AIRFLOW_IMAGE=apache/airflow:3\.3\.\d+-python3\.11$", text, re.M)
    assert "JAVA_HOME=/opt/java/openjdk" in text and "17" in re.search(
        r"^ARG JAVA_IMAGE=.*$", text, re.M
    ).group(0)
    req = text.index('requirements.txt"')
    reinstall = text.index("--force-reinstall --no-deps")
    check = text.index('scripts/check_pyspark.py" ')
    assert req < reinstall < check, "pyspark must be reinstalled after the provider, then checked"
    # The package runs from a checkout-like layout, as natively: jobs and expectations/ beside it.
    assert "ENV PYTHONPATH=${SPARK_JOBS_HOME}" in text
    # Airflow 3 on PostgreSQL opens a sync (psycopg2) and an async (asyncpg) engine on the same URL.
    assert '"psycopg2-binary==' in text and '"asyncpg==' in text
    assert '-c "${SPARK_JOBS_HOME}/constraints.txt"' in text


# ----------------------------------------------------------------------------------------------------------
# The checks can fail: corrupted copies
# ----------------------------------------------------------------------------------------------------------


def test_uncorrupted_copy_passes(relocated_compose, empty_env_file):
    copy = relocated_compose()
    assert yaml_problems(copy, TEST_SECRETS) == []
    if compose_cli_available():
        assert cli_problems(copy, clean_env(TEST_SECRETS), empty_env_file) == []


@pytest.mark.parametrize("corruption", sorted(CORRUPTIONS))
def test_pyyaml_checker_rejects_corrupted_copy(corruption, relocated_compose):
    copy = relocated_compose(CORRUPTIONS[corruption])
    assert yaml_problems(copy, TEST_SECRETS), f"{corruption} went unnoticed"


@pytest.mark.parametrize("corruption", sorted(CORRUPTIONS))
def test_compose_cli_checker_rejects_corrupted_copy(corruption, relocated_compose, needs_cli, empty_env_file):
    copy = relocated_compose(CORRUPTIONS[corruption])
    assert cli_problems(copy, clean_env(TEST_SECRETS), empty_env_file), f"{corruption} went unnoticed"


def test_unset_secret_in_copy_is_rejected_by_both(relocated_compose, empty_env_file):
    copy = relocated_compose()
    secrets = {k: v for k, v in TEST_SECRETS.items() if k != "AIRFLOW__API_AUTH__JWT_SECRET"}
    assert any("AIRFLOW__API_AUTH__JWT_SECRET" in p for p in yaml_problems(copy, secrets))
    if compose_cli_available():
        assert any(
            "AIRFLOW__API_AUTH__JWT_SECRET" in p
            for p in cli_problems(copy, clean_env(secrets), empty_env_file)
        )


def test_missing_dockerfile_copy_source_is_rejected(relocated_compose, tmp_path):
    broken = tmp_path / "Dockerfile.broken"
    broken.write_text((DOCKER_DIR / "Dockerfile").read_text() + "\nCOPY no/such/dir /opt/x\n")
    copy = relocated_compose(_replace_once("dockerfile: docker/Dockerfile", f"dockerfile: {broken}"))
    problems = yaml_problems(copy, TEST_SECRETS)
    assert any("no/such/dir" in p for p in problems), problems


def test_interpolation_semantics():
    env = {"SET": "v", "EMPTY": ""}
    assert interpolate("${SET:-d}/${UNSET:-d}/${EMPTY:-d}/${EMPTY-d}", env, "x") == "v/d/d/"
    assert interpolate("$${NOT_A_VAR} $$SET ${SET}", env, "x") == "${NOT_A_VAR} $SET v"
    with pytest.raises(InterpolationError, match="EMPTY"):
        interpolate("${EMPTY:?msg}", env, "x")
    assert interpolate("${EMPTY?msg}", env, "x") == ""
    with pytest.raises(InterpolationError, match="UNSET"):
        interpolate("${UNSET?msg}", env, "x")


# ----------------------------------------------------------------------------------------------------------
# docker/airflow_init.py: the second line of the secrets guard (runs inside the stack before anything else)
# ----------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def airflow_init():
    spec = importlib.util.spec_from_file_location("airflow_init", DOCKER_DIR / "airflow_init.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _init_env(**overrides):
    env = {
        **TEST_SECRETS,
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": "postgresql+psycopg2://airflow:pw@postgres:5432/airflow",
    }
    env.pop("POSTGRES_PASSWORD")
    env.update(overrides)
    return {k: v for k, v in env.items() if v is not None}


def test_init_accepts_good_secrets(airflow_init):
    assert airflow_init.secret_problems(_init_env()) == []


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ({"AIRFLOW__CORE__FERNET_KEY": None}, "AIRFLOW__CORE__FERNET_KEY is not set"),
        ({"AIRFLOW__CORE__FERNET_KEY": "not-a-fernet-key"}, "is not a Fernet key"),
        ({"AIRFLOW__API_AUTH__JWT_SECRET": "short"}, "AIRFLOW__API_AUTH__JWT_SECRET is too short"),
        ({"AIRFLOW__API__SECRET_KEY": ""}, "AIRFLOW__API__SECRET_KEY is not set"),
        ({"AIRFLOW_ADMIN_PASSWORD": "1234"}, "AIRFLOW_ADMIN_PASSWORD is too short"),
        ({"AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": "sqlite:////tmp/a.db"}, "SQLite"),
    ],
)
def test_init_refuses_bad_secrets(airflow_init, override, expected):
    problems = airflow_init.secret_problems(_init_env(**override))
    assert len(problems) == 1 and expected in problems[0], problems


def test_init_main_exits_2_naming_the_secret(airflow_init, monkeypatch, capsys):
    for k, v in _init_env(AIRFLOW_ADMIN_PASSWORD=None).items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("AIRFLOW_ADMIN_PASSWORD", raising=False)
    assert airflow_init.main(["--skip-migrate"]) == 2
    assert "AIRFLOW_ADMIN_PASSWORD is not set" in capsys.readouterr().err


def test_init_writes_password_file_simple_auth_manager_reads(airflow_init, monkeypatch, tmp_path):
    passwords = tmp_path / "auth" / "passwords.json"
    for k, v in _init_env().items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS", "ops:admin")
    monkeypatch.setenv("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE", str(passwords))
    assert airflow_init.main(["--skip-migrate"]) == 0
    assert json.loads(passwords.read_text()) == {"ops": TEST_SECRETS["AIRFLOW_ADMIN_PASSWORD"]}
    assert passwords.stat().st_mode & 0o777 == 0o660
    # Airflow's own reader, in a subprocess: importing airflow here would fix its settings for the session.
    probe = (
        "import json, sys\n"
        "from airflow.api_fastapi.auth.managers.simple.simple_auth_manager import SimpleAuthManager\n"
        "print(json.dumps(SimpleAuthManager.get_passwords()))\n"
    )
    env = {
        "PATH": os.environ["PATH"],
        "AIRFLOW_HOME": str(tmp_path / "airflow-home"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords),
    }
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == {"ops": TEST_SECRETS["AIRFLOW_ADMIN_PASSWORD"]}
