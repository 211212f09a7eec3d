"""The project's Great Expectations context (`expectations/` at the repository root), opened safely.

GX loads a suite that names an expectation it does not know by logging the error and leaving the
expectation out, so the suite then passes without it. Everything here therefore imports the custom
expectations first and checks each suite it runs against its stored file: an unknown or invalid
expectation is an error, never a silent pass.
"""

from __future__ import annotations

import os
from pathlib import Path

import great_expectations as gx
from great_expectations.checkpoint import Checkpoint
from great_expectations.core import ExpectationSuite
from great_expectations.data_context import FileDataContext
from great_expectations.exceptions import ExpectationNotFoundError
from great_expectations.expectations.expectation_configuration import ExpectationConfiguration

# Registers the custom expectation classes with GX: must happen before any suite is loaded.
from spark_jobs.quality import expectations as _custom_expectations  # noqa: F401

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_CONTEXT_ROOT = REPO_ROOT / "expectations"
# great_expectations.yml puts results and Data Docs under this variable.
REPORTS_DIR_VARIABLE = "GX_REPORTS_DIR"


class SuiteIntegrityError(RuntimeError):
    """A suite names expectations this process cannot run, or GX dropped some while loading it."""


def context_root() -> Path:
    return Path(os.environ.get("GX_CONTEXT_ROOT") or DEFAULT_CONTEXT_ROOT)


def open_context(reports_dir: Path | str | None = None, root: Path | str | None = None) -> FileDataContext:
    """The file context at `root` (default `expectations/`), with results and Data Docs in `reports_dir`.

    Without `reports_dir`, results go where `$GX_REPORTS_DIR` or config_variables.yml says.
    """
    root_dir = Path(root) if root else context_root()
    if not (root_dir / "great_expectations.yml").is_file():
        raise FileNotFoundError(f"no great_expectations.yml in {root_dir}")
    runtime_environment = {}
    if reports_dir is not None:
        runtime_environment[REPORTS_DIR_VARIABLE] = str(Path(reports_dir).resolve())
    return gx.get_context(
        mode="file", context_root_dir=str(root_dir), runtime_environment=runtime_environment
    )


def stored_suite_dict(context: FileDataContext, name: str) -> dict:
    store = context.expectations_store
    key = store.get_key(name=name)
    if not store.has_key(key):
        raise SuiteIntegrityError(f"suite {name!r} is not in the expectations store")
    return store.get(key)


def _problems_in_stored(context: FileDataContext, name: str) -> tuple[list[str], int]:
    stored = stored_suite_dict(context, name).get("expectations") or []
    problems = []
    for entry in stored:
        # The store hands back configurations; they build an expectation only if its class is registered.
        config = entry if isinstance(entry, ExpectationConfiguration) else ExpectationConfiguration(**entry)
        try:
            config.to_domain_obj()
        except ExpectationNotFoundError:
            problems.append(f"{config.type!r} is not a registered expectation")
        except Exception as error:  # invalid arguments: GX drops or raises, depending on the error
            first_line = str(error).strip().splitlines()[-1] if str(error).strip() else type(error).__name__
            problems.append(f"{config.type!r} is invalid: {first_line}")
    return problems, len(stored)


def _raise(name: str, problems: list[str]) -> None:
    raise SuiteIntegrityError(f"suite {name!r} cannot be run as written: " + "; ".join(problems))


def check_suite(context: FileDataContext, suite: ExpectationSuite) -> ExpectationSuite:
    """Raise `SuiteIntegrityError` unless every stored expectation of `suite` is known, valid and loaded."""
    problems, stored_count = _problems_in_stored(context, suite.name)
    if not problems and len(suite.expectations) != stored_count:
        problems.append(f"GX loaded {len(suite.expectations)} of the {stored_count} stored expectations")
    if problems:
        _raise(suite.name, problems)
    return suite


def load_suite(context: FileDataContext, name: str) -> ExpectationSuite:
    """The suite `name`, checked against its stored file before and after GX loads it."""
    problems, _ = _problems_in_stored(context, name)
    if problems:
        _raise(name, problems)
    return check_suite(context, context.suites.get(name))


def load_checkpoint(context: FileDataContext, name: str) -> Checkpoint:
    """The checkpoint `name`, after checking every suite it would run."""
    try:
        # Building the checkpoint loads its suites: an invalid argument of a known rule raises here.
        checkpoint = context.checkpoints.get(name)
    except Exception as error:
        first_line = str(error).strip().splitlines()[-1] if str(error).strip() else type(error).__name__
        raise SuiteIntegrityError(f"checkpoint {name!r} cannot be loaded: {first_line}") from error
    for definition in checkpoint.validation_definitions:
        check_suite(context, definition.suite)
    return checkpoint
