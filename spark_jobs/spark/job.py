"""What a runtime needs to know about a job, in a form that can be shipped to executors."""

from __future__ import annotations

import argparse
import functools
import importlib
import inspect
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spark_jobs.spark.errors import UserError

if TYPE_CHECKING:  # pyarrow: not for the stateful processor's unpickling (task_processor.py)
    from spark_jobs.spark.topics import TopicSchema

_UNITS_MS = {"ms": 1, "s": 1000, "sec": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}
_DURATION = re.compile(r"^\s*(-?\d+)\s*([a-z]*)\s*$")


def parse_duration_ms(text: str | int) -> int:
    """`120000`, `120000ms`, `120s`, `2m`, `2min`, `1h`, `1d` -> milliseconds."""
    if isinstance(text, int):
        return text
    match = _DURATION.match(str(text).lower())
    if not match or match.group(2) not in ("", *_UNITS_MS):
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (e.g. 120000, 120s, 2min, 1h)")
    return int(match.group(1)) * _UNITS_MS.get(match.group(2) or "ms", 1)


@dataclass(frozen=True)
class JobOption:
    """One topology option: `--name-with-dashes` on the command line, `name` in build_topology.

    `kind`: duration (milliseconds; the command line also takes 120s, 2min, 1h), int, float or str.
    """

    name: str
    default: Any
    help: str
    kind: str = "duration"

    def __post_init__(self):
        if self.kind not in _KINDS:
            raise ValueError(f"option {self.name!r}: kind must be one of {sorted(_KINDS)}, got {self.kind!r}")
        if not _OPTION_NAME.match(self.name):
            raise ValueError(f"option name must be a Python identifier in snake_case, got {self.name!r}")

    def parse(self, text: str | int | float) -> Any:
        """A command-line text (or an already typed value, e.g. from an Airflow param) -> the value."""
        if self.kind == "duration":
            return parse_duration_ms(text)
        if self.kind == "int" and isinstance(text, float) and not text.is_integer():
            raise argparse.ArgumentTypeError(f"{self.name}: not an integer: {text!r}")
        try:
            return _KINDS[self.kind](text)
        except (TypeError, ValueError) as error:
            raise argparse.ArgumentTypeError(f"{self.name}: not a {self.kind}: {text!r}") from error

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    def json_schema(self) -> dict[str, Any]:
        """The JSON schema of the option's value (Airflow params check a form against it)."""
        kind = {"duration": "integer", "int": "integer", "float": "number", "str": "string"}[self.kind]
        schema: dict[str, Any] = {"type": kind, "description": self.help}
        if self.kind == "duration":
            schema["minimum"] = 0
        return schema


_KINDS = {"duration": int, "int": int, "float": float, "str": str}
_OPTION_NAME = re.compile(r"^[a-z_][a-z0-9_]*$")


class ContractError(ValueError):
    """A job module does not declare what a job declares (`JobContract`), or options do not fit it."""


def default_conflicts(build_topology, options) -> list[str]:
    """Where `build_topology`'s signature disagrees with `options`: a literal default other than the
    option's, or a keyword that is no option. Empty when the option defaults are written once."""
    by_name = {option.name: option for option in options}
    conflicts = []
    for name, parameter in inspect.signature(build_topology).parameters.items():
        if parameter.kind is inspect.Parameter.VAR_KEYWORD:
            continue
        if name not in by_name:
            conflicts.append(f"{name} is not in OPTIONS")
        elif parameter.default is not inspect.Parameter.empty and parameter.default != by_name[name].default:
            conflicts.append(f"{name}={parameter.default!r}, OPTIONS says {by_name[name].default!r}")
    return conflicts


def with_option_defaults(options):
    """Decorates a job's `build_topology` so that each keyword it is not given takes its option's default:
    the defaults are written once, in `OPTIONS`, and `build_topology()` builds what the command line builds
    without flags. The decorated function declares the options as keyword-only parameters without
    defaults; an unknown keyword is a TypeError."""
    defaults = {option.name: option.default for option in options}

    def decorate(build_topology):
        conflicts = default_conflicts(build_topology, options)
        if conflicts:
            raise ContractError(f"{build_topology.__module__}.build_topology: {'; '.join(conflicts)}")

        @functools.wraps(build_topology)
        def build_with_defaults(**given):
            unknown = sorted(set(given) - set(defaults))
            if unknown:
                raise TypeError(
                    f"{build_topology.__module__}.build_topology has no options {unknown}; "
                    f"its options: {sorted(defaults)}"
                )
            return build_topology(**{**defaults, **given})

        return build_with_defaults

    return decorate


@dataclass(frozen=True)
class JobContract:
    """What a job module declares once (docs/jobs.md); its command line, DAG, params, Assets and
    quality suites all derive from it.

    A job module provides `build_topology(**options)`, `INPUT_TOPICS` (ordered: the order breaks
    timestamp ties between topics; a one-input job may say `INPUT_TOPIC`), `OUTPUT_TOPICS` (topic ->
    TopicSchema) and `OPTIONS` (JobOption list: the options' only defaults; `with_option_defaults` gives
    them to build_topology, and a literal default of build_topology that disagrees is refused).
    """

    module: str
    name: str
    description: str
    input_topics: tuple[str, ...]
    output_topics: dict[str, TopicSchema]
    options: tuple[JobOption, ...]

    @classmethod
    def of(cls, module: str) -> JobContract:
        mod = importlib.import_module(module)
        if not callable(getattr(mod, "build_topology", None)):
            raise ContractError(f"job module {module} has no build_topology(**options)")
        if hasattr(mod, "INPUT_TOPICS"):
            inputs = mod.INPUT_TOPICS
            if isinstance(inputs, str) or not isinstance(inputs, tuple | list):
                raise ContractError(f"{module}.INPUT_TOPICS must be a tuple of topic names, got {inputs!r}")
            inputs = tuple(inputs)
        elif hasattr(mod, "INPUT_TOPIC"):
            inputs = (mod.INPUT_TOPIC,)
        else:
            raise ContractError(f"job module {module} declares neither INPUT_TOPICS nor INPUT_TOPIC")
        if not inputs or len(set(inputs)) != len(inputs) or not all(isinstance(t, str) and t for t in inputs):
            raise ContractError(f"{module}: input topics must be distinct non-empty names, got {inputs!r}")
        options = tuple(getattr(mod, "OPTIONS", ()))
        names = [option.name for option in options]
        if len(set(names)) != len(names):
            raise ContractError(f"{module}.OPTIONS names an option twice: {names}")
        conflicts = default_conflicts(mod.build_topology, options)
        if conflicts:
            raise ContractError(f"{module}.build_topology disagrees with OPTIONS: {'; '.join(conflicts)}")
        doc = (mod.__doc__ or "").strip()
        return cls(
            module=module,
            name=module.rsplit(".", 1)[-1],
            description=doc.splitlines()[0] if doc else module,
            input_topics=inputs,
            output_topics=dict(getattr(mod, "OUTPUT_TOPICS", {})),
            options=options,
        )

    def defaults(self) -> dict[str, Any]:
        return {option.name: option.default for option in self.options}

    def resolve_options(self, given: dict[str, Any] | None = None) -> dict[str, Any]:
        """Every option's effective value: the defaults, overridden by `given` (texts or typed values,
        each parsed by its option). An unknown name is an error, never silently ignored."""
        given = dict(given or {})
        by_name = {option.name: option for option in self.options}
        unknown = sorted(set(given) - set(by_name))
        if unknown:
            raise ContractError(f"{self.name} has no options {unknown}; its options: {sorted(by_name)}")
        resolved = self.defaults()
        for name, value in given.items():
            resolved[name] = by_name[name].parse(value)
        return resolved


_TOPOLOGIES: dict[tuple[str, str], Any] = {}


@dataclass(frozen=True)
class JobSpec:
    """A job module (importable by name on every executor) and the options of its topology.

    The module declares a `JobContract`. The name, not the function, is shipped: under `spark-submit path/to/job.py`
    the job runs as `__main__` on the driver, but executors import it by its package name.
    """

    module: str
    options: dict[str, Any] = field(default_factory=dict)
    num_partitions: int = 4

    def __post_init__(self):
        if self.num_partitions < 1:
            raise ValueError(f"num_partitions must be at least 1, got {self.num_partitions}")

    def _module(self):
        return importlib.import_module(self.module)

    @property
    def contract(self) -> JobContract:
        return JobContract.of(self.module)

    @property
    def input_topics(self) -> tuple[str, ...]:
        return self.contract.input_topics

    @property
    def input_topic(self) -> str:
        """The input topic of a one-input job."""
        topics = self.input_topics
        if len(topics) != 1:
            raise ContractError(f"{self.module} has {len(topics)} input topics {topics}, not one")
        return topics[0]

    @property
    def topic_schemas(self) -> dict[str, TopicSchema]:
        return self.contract.output_topics

    def effective_options(self) -> dict[str, Any]:
        """Every option's value for this run: the contract's defaults, overridden by `options`."""
        return self.contract.resolve_options(self.options)

    def options_key(self) -> str:
        return json.dumps(self.options, sort_keys=True, default=str)

    @property
    def reads_input_values(self) -> bool:
        """False when the topology never looks at input values: they are then not shipped to tasks."""
        return self.topology().reads_values(self.input_topic)

    def topology(self):
        """The job's Topology, built once per process (executors call this for every micro-batch)."""
        cache_key = (self.module, self.options_key())
        topology = _TOPOLOGIES.get(cache_key)
        if topology is None:
            topology = _TOPOLOGIES[cache_key] = self._module().build_topology(**self.options)
        return topology


# What made an output folder: read by validation (any job's, with nothing job-specific on its command line).
OUTPUT_JOB_FILE = "_job.json"


def write_job_record(output_dir: str | os.PathLike, spec: JobSpec, checkpoint_id: str) -> Path:
    """`<output>/_job.json`: the job module, its effective options and topics, for whoever reads the
    output (written atomically at each run start; a run with other options is refused before this)."""
    contract = spec.contract
    record = {
        "module": spec.module,
        "name": contract.name,
        "options": spec.effective_options(),
        "partitions": spec.num_partitions,
        "input_topics": list(contract.input_topics),
        "output_topics": sorted(contract.output_topics),
        "checkpoint_id": checkpoint_id,
    }
    output = Path(output_dir)
    output.mkdir(parents=True, exist_ok=True)
    tmp = output / f".{OUTPUT_JOB_FILE}.{os.getpid()}"
    tmp.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, output / OUTPUT_JOB_FILE)
    return output / OUTPUT_JOB_FILE


class MissingJobRecord(UserError, FileNotFoundError):
    """A folder that is not the output of a job run by this project's runtime."""


def recorded_job(output_dir: str | os.PathLike) -> JobSpec:
    """The job that made `output_dir`, with the options it ran with (see `write_job_record`)."""
    path = Path(output_dir) / OUTPUT_JOB_FILE
    if not path.is_file():
        raise MissingJobRecord(
            f"{path} not found: {output_dir} is not the output folder of a job run by this project's runtime "
            "(or no run has started on it yet)"
        )
    record = json.loads(path.read_text())
    return JobSpec(record["module"], dict(record["options"]), int(record["partitions"]))
