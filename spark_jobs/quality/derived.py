"""The suites of a job's outputs: rules derived from its topology, plus the rules its author wrote.

`topic_suites(spec)` gives one suite per output topic, one for the quarantine and one for the late
records. Each holds expectation configurations (`{"type": ..., "kwargs": ...}`, as GX stores them):

- the shape every output topic has (the columns of docs/jobs.md, a unique emission position);
- the rules that follow from the engine's promises for that topic (`spark_jobs.streams.guarantees`),
  with the figures of the topology as it was built from the recorded options;
- the job's hand-written rules: the JSON file its module names in `QUALITY_RULES` (topic -> list of
  expectation configurations; `{"$PARAMETER": "<option name>"}` takes the run's option value).

Nothing here knows any particular job.
"""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spark_jobs.spark.job import JobSpec
from spark_jobs.spark.topics import BUILT_IN_TOPICS, LATE_SCHEMA, LATE_TOPIC, QUARANTINE_TOPIC
from spark_jobs.streams.guarantees import (
    AlignedGrid,
    DeclaredAggregates,
    SuppressedFinals,
    WindowedUpdates,
    topic_promises,
)

QUARANTINE_SUITE = "quarantine"
LATE_SUITE = "late"
OUTPUT_COLUMNS = ("key", "value", "timestamp", "window_start", "window_end", "partition", "seq")
EMISSION_ORDER = ["partition", "seq"]
WINDOW = ["key", "window_start"]


@dataclass(frozen=True)
class TopicSuite:
    """A suite (named like its topic) and the topic it checks."""

    suite: str
    topic: str
    expectations: tuple[dict[str, Any], ...]

    @property
    def has_emission_order(self) -> bool:
        """Job topics have (partition, seq); the quarantine and the late records do not."""
        return self.topic not in BUILT_IN_TOPICS


def _rule(kind: str, **kwargs: Any) -> dict[str, Any]:
    return {"type": kind, "kwargs": kwargs}


def _not_null(*columns: str) -> list[dict[str, Any]]:
    return [_rule("expect_column_values_to_not_be_null", column=c) for c in columns]


def shape_rules() -> list[dict[str, Any]]:
    """What every output topic of every job has: the columns of docs/jobs.md and a unique (partition, seq)."""
    return [
        *[_rule("expect_column_to_exist", column=c) for c in OUTPUT_COLUMNS],
        *_not_null("timestamp", "partition", "seq"),
        _rule("expect_compound_columns_to_be_unique", column_list=EMISSION_ORDER),
    ]


def _window_rules(size: int) -> list[dict[str, Any]]:
    return [
        *_not_null("key", "window_start", "window_end"),
        _rule("expect_timestamps_within_window"),
        _rule("expect_window_length_to_equal", size_ms=size),
    ]


def promise_rules(promise: Any) -> list[dict[str, Any]]:
    """The rules that check one promise of the engine (see guarantees.py for why each holds)."""
    if isinstance(promise, WindowedUpdates):
        rules = [
            *_window_rules(promise.size),
            _rule("expect_no_updates_after_window_closes", grace_ms=promise.grace),
            _rule("expect_timestamps_to_never_go_backwards_per_key", key_columns=WINDOW),
        ]
        if promise.counts:
            rules += [
                _rule("expect_values_to_never_decrease_per_key", column="value", key_columns=WINDOW),
                _rule("expect_column_values_to_be_between", column="value", min_value=1),
            ]
        return rules
    if isinstance(promise, SuppressedFinals):
        rules = [*_window_rules(promise.size), _rule("expect_emitted_at_most_once_per_key_and_window")]
        if promise.tumbling:
            rules.append(_rule("expect_timestamps_to_never_go_backwards_per_key"))
        if promise.updates_topic is not None:
            updates = promise.updates_topic
            rules += [
                _rule(
                    "expect_rows_to_appear_in_topic",
                    topic=updates,
                    columns=["key", "window_start", "window_end", "value", "timestamp"],
                ),
                _rule("expect_nothing_later_in_topic", topic=updates, columns=WINDOW),
                _rule("expect_emitted_after_window_closes", topic=updates, grace_ms=promise.grace),
            ]
        return rules
    if isinstance(promise, DeclaredAggregates):
        return _declared_rules(promise)
    if isinstance(promise, AlignedGrid):
        return [
            _rule("expect_timestamps_on_aligned_grid", interval_ms=promise.interval, shift_ms=promise.shift)
        ]
    raise TypeError(f"no rules for promise {promise!r}")


def _declared_rules(promise: DeclaredAggregates) -> list[dict[str, Any]]:
    """A declared aggregation's value struct: counts at least 1, min at most max of the same field; per
    group (key and window), in its updates, counts and maxima never go down."""
    group = WINDOW if promise.windowed else ["key"]
    rules = [*_not_null("value")]
    for name in promise.counts:
        rules += [
            *_not_null(f"value.{name}"),
            _rule("expect_column_values_to_be_between", column=f"value.{name}", min_value=1),
        ]
    for low, high in promise.ordered:
        rules.append(
            _rule(
                "expect_column_pair_values_a_to_be_greater_than_b",
                column_A=f"value.{high}",
                column_B=f"value.{low}",
                or_equal=True,
                ignore_row_if="either_value_is_missing",
            )
        )
    if promise.per_update:
        for name in (*promise.counts, *promise.maxima):
            rules.append(
                _rule("expect_values_to_never_decrease_per_key", column=f"value.{name}", key_columns=group)
            )
    return rules


def quarantine_rules() -> list[dict[str, Any]]:
    return [
        _rule("expect_column_to_exist", column="reason"),
        _rule("expect_column_values_to_be_non_blank", column="reason"),
    ]


def late_graces(topology: Any) -> dict[str, int]:
    """The grace of every windowed node of `topology` (the nodes that drop records of closed windows)."""
    graces = {}
    for name, node_spec in topology.specs.items():
        windows = getattr(node_spec.factory(), "windows", None)
        if windows is not None and getattr(windows, "grace", None) is not None:
            graces[name] = int(windows.grace)
    return graces


def late_rules(topology: Any) -> list[dict[str, Any]]:
    """The late records' columns, and that each was dropped after its window had closed."""
    return [
        *[_rule("expect_column_to_exist", column=c) for c in LATE_SCHEMA.names],
        *_not_null("node", "partition", "timestamp", "stream_time"),
        _rule("expect_dropped_only_after_window_closes", grace_by_node=late_graces(topology)),
    ]


def handwritten_rules(spec: JobSpec) -> dict[str, list[dict[str, Any]]]:
    """The job author's rules (`QUALITY_RULES`: a JSON file beside the job module), topic -> rules."""
    module = importlib.import_module(spec.module)
    path = getattr(module, "QUALITY_RULES", None)
    if path is None:
        return {}
    path = Path(path)
    if not path.is_absolute():
        path = Path(module.__file__).resolve().parent / path
    if not path.is_file():
        raise FileNotFoundError(f"{spec.module}.QUALITY_RULES names {path}, which does not exist")
    rules = json.loads(path.read_text())
    unknown = sorted(set(rules) - set(spec.topic_schemas) - set(BUILT_IN_TOPICS))
    if unknown:
        raise ValueError(f"{path} has rules for topics {unknown} that {spec.module} does not output")
    return rules


def topic_suites(spec: JobSpec) -> list[TopicSuite]:
    """One suite per output topic of the job (in declared order), then the quarantine's and the late
    records'."""
    topology = spec.topology()
    promises = topic_promises(topology)
    written = handwritten_rules(spec)
    suites = []
    for topic in spec.topic_schemas:
        derived = [rule for promise in promises.get(topic, []) for rule in promise_rules(promise)]
        rules = shape_rules() + derived + list(written.get(topic, []))
        suites.append(TopicSuite(topic, topic, _distinct(rules)))
    quarantine = quarantine_rules() + list(written.get(QUARANTINE_TOPIC, []))
    suites.append(TopicSuite(QUARANTINE_SUITE, QUARANTINE_TOPIC, _distinct(quarantine)))
    late = late_rules(topology) + list(written.get(LATE_TOPIC, []))
    suites.append(TopicSuite(LATE_SUITE, LATE_TOPIC, _distinct(late)))
    return suites


def _distinct(rules: list[dict[str, Any]]) -> tuple[dict[str, Any], ...]:
    """A hand-written rule the derivation also gives is checked once."""
    seen: dict[str, dict[str, Any]] = {}
    for rule in rules:
        seen.setdefault(json.dumps(rule, sort_keys=True), rule)
    return tuple(seen.values())
