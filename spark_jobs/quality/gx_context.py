"""The Great Expectations context of a validation run, opened safely.

`expectations/` at the repository root is the template: its `great_expectations.yml` says where results
and Data Docs go (`${GX_REPORTS_DIR}`). A validation run gets its own context under
`<reports>/gx_context/`, made anew from the template each time, into which it writes the suites of the
job it validates (derived from the job's topology, see derived.py), their validation definitions and
checkpoints. The repository is never written to, and a job the project has never seen needs nothing in it.

GX loads a suite that names an expectation it does not know by logging the error and leaving the
expectation out, so the suite then passes without it. Everything here therefore imports the custom
expectations first and checks each suite it runs against its stored file: an unknown or invalid
expectation is an error, never a silent pass.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path

import great_expectations as gx
from great_expectations.checkpoint import Checkpoint
from great_expectations.core import ExpectationSuite, ValidationDefinition
from great_expectations.data_context import FileDataContext
from great_expectations.exceptions import ExpectationNotFoundError
from great_expectations.expectations.expectation_configuration import ExpectationConfiguration

# Registers the custom expectation classes with GX: must happen before any suite is loaded.
from spark_jobs.quality import expectations as _custom_expectations  # noqa: F401

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_CONTEXT_ROOT = REPO_ROOT / "expectations"
# great_expectations.yml puts results and Data Docs under this variable.
REPORTS_DIR_VARIABLE = "GX_REPORTS_DIR"
# The run's own context, under the reports folder.
RUN_CONTEXT_DIR = "gx_context"
TEMPLATE_FILES = ("great_expectations.yml", "config_variables.yml")
DATASOURCE = "job_outputs"
BATCH_DEFINITION = "whole_topic"
EMISSION_ORDER = ["partition", "seq"]


class SuiteIntegrityError(RuntimeError):
    """A suite names expectations this process cannot run, or GX dropped some while loading it."""


def context_root() -> Path:
    return Path(os.environ.get("GX_CONTEXT_ROOT") or DEFAULT_CONTEXT_ROOT)


def open_context(reports_dir: Path | str, root: Path | str | None = None) -> FileDataContext:
    """A fresh context at `<reports_dir>/gx_context`, configured as the template at `root` (default
    `expectations/`), with results and Data Docs in `reports_dir`."""
    template = Path(root) if root else context_root()
    if not (template / "great_expectations.yml").is_file():
        raise FileNotFoundError(f"no great_expectations.yml in {template}")
    reports = Path(reports_dir).resolve()
    run_root = reports / RUN_CONTEXT_DIR
    shutil.rmtree(run_root, ignore_errors=True)  # suites of an earlier run must not linger
    run_root.mkdir(parents=True)
    for name in TEMPLATE_FILES:
        if (template / name).is_file():
            shutil.copy2(template / name, run_root / name)
    return gx.get_context(
        mode="file",
        context_root_dir=str(run_root),
        runtime_environment={REPORTS_DIR_VARIABLE: str(reports)},
    )


def _expectation(suite: str, config: dict):
    """An expectation object from a stored-form configuration; an unknown or invalid rule is an error."""
    try:
        return ExpectationConfiguration(**config).to_domain_obj()
    except ExpectationNotFoundError as error:
        raise SuiteIntegrityError(
            f"suite {suite!r}: {config.get('type')!r} is not a registered expectation"
        ) from error
    except Exception as error:
        first_line = str(error).strip().splitlines()[-1] if str(error).strip() else type(error).__name__
        raise SuiteIntegrityError(
            f"suite {suite!r}: {config.get('type')!r} is invalid: {first_line}"
        ) from error


def add_suites(context: FileDataContext, suites: Sequence, engine: str = "spark") -> dict[str, Checkpoint]:
    """Store each suite (`.suite` name, `.topic`, `.expectations` in stored form) with its validation
    definition on a dataframe asset of its topic (Spark or pandas dataframes, as `engine` says), and a
    checkpoint of the same name. Returns the checkpoints by suite name, loaded back and checked like any
    stored one. Data Docs are built once after all of them ran (`context.build_data_docs()`)."""
    if engine not in ("spark", "local"):
        raise ValueError(f"engine must be spark or local, got {engine!r}")
    sources = context.data_sources
    source = sources.add_spark(name=DATASOURCE) if engine == "spark" else sources.add_pandas(name=DATASOURCE)
    for entry in suites:
        asset = source.add_dataframe_asset(name=entry.suite)
        batch = asset.add_batch_definition_whole_dataframe(BATCH_DEFINITION)
        expectations = [_expectation(entry.suite, config) for config in entry.expectations]
        suite = context.suites.add(ExpectationSuite(name=entry.suite, expectations=expectations))
        definition = context.validation_definitions.add(
            ValidationDefinition(name=entry.suite, data=batch, suite=suite)
        )
        result_format: dict = {"result_format": "COMPLETE"}
        if entry.has_emission_order:
            result_format["unexpected_index_column_names"] = EMISSION_ORDER
        context.checkpoints.add(
            Checkpoint(
                name=entry.suite,
                validation_definitions=[definition],
                result_format=result_format,
            )
        )
    return {entry.suite: load_checkpoint(context, entry.suite) for entry in suites}


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
