"""What a runtime needs to know about a job, in a form that can be shipped to executors."""

from __future__ import annotations

import argparse
import importlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

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

    def parse(self, text: str) -> Any:
        if self.kind == "duration":
            return parse_duration_ms(text)
        return {"int": int, "float": float, "str": str}[self.kind](text)


_TOPOLOGIES: dict[tuple[str, str], Any] = {}


@dataclass(frozen=True)
class JobSpec:
    """A job module (importable by name on every executor) and the options of its topology.

    The module provides `build_topology(**options)`, `INPUT_TOPIC` and optionally `OUTPUT_TOPICS`
    (topic -> TopicSchema). The name, not the function, is shipped: under `spark-submit path/to/job.py`
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
    def input_topic(self) -> str:
        return self._module().INPUT_TOPIC

    @property
    def topic_schemas(self) -> dict[str, TopicSchema]:
        return dict(getattr(self._module(), "OUTPUT_TOPICS", {}))

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
