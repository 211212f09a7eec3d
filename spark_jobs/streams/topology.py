"""Topology: the graph of sources, processors and sinks, validated as it is built."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from .nodes.base import Node, SinkNode, SourceNode, UserProcessorNode
from .processor import Processor


@dataclass
class NodeSpec:
    """How to create one node for a task. `factory` returns a fresh runtime Node every call."""

    name: str
    kind: str  # "source" | "processor" | "sink"
    parents: tuple[str, ...]
    factory: Callable[[], Node]
    topics: tuple[str, ...] = ()
    sink_topic: str | None = None
    children: list[str] = field(default_factory=list)
    # False for nodes whose output does not depend on the values they receive (a windowed count).
    reads_values: bool = True


class Topology:
    """A processing graph. Processor API: `add_source`, `add_processor`, `add_sink` (each returns self).

    Misuse raises ValueError at once: duplicate names, unknown or sink parents, a topic read twice.
    """

    def __init__(self) -> None:
        self._specs: dict[str, NodeSpec] = {}
        self._source_by_topic: dict[str, str] = {}

    # -- Processor API ----------------------------------------------------------------------------------

    def add_source(self, name: str, *topics: str) -> Topology:
        if not topics:
            raise ValueError(f"source {name!r} needs at least one topic")
        for topic in topics:
            if not isinstance(topic, str) or not topic:
                raise ValueError(f"source {name!r}: topic names must be non-empty strings, got {topic!r}")
            if topic in self._source_by_topic:
                raise ValueError(
                    f"topic {topic!r} is already read by source {self._source_by_topic[topic]!r}"
                )
        if len(set(topics)) != len(topics):
            raise ValueError(f"source {name!r} lists a topic twice: {topics}")
        self._check_new_name(name)
        self._add(NodeSpec(name, "source", (), lambda: SourceNode(name, topics), topics=tuple(topics)))
        for topic in topics:
            self._source_by_topic[topic] = name
        return self

    def add_processor(self, name: str, supplier: Callable[[], Processor], *parent_names: str) -> Topology:
        if not callable(supplier):
            raise ValueError(
                f"processor {name!r}: supplier must be a zero-argument callable returning a Processor"
            )
        return self._add_node(name, lambda: UserProcessorNode(name, supplier()), parent_names)

    def add_sink(self, name: str, topic: str, *parent_names: str) -> Topology:
        if not isinstance(topic, str) or not topic:
            raise ValueError(f"sink {name!r}: topic must be a non-empty string, got {topic!r}")
        self._check_new_name(name)
        self._check_parents(name, parent_names)
        self._add(
            NodeSpec(name, "sink", tuple(parent_names), lambda: SinkNode(name, topic), sink_topic=topic)
        )
        return self

    # -- used by the DSL --------------------------------------------------------------------------------

    def _add_node(
        self,
        name: str,
        factory: Callable[[], Node],
        parent_names: tuple[str, ...] | list[str],
        reads_values: bool = True,
    ) -> Topology:
        self._check_new_name(name)
        self._check_parents(name, parent_names)
        self._add(NodeSpec(name, "processor", tuple(parent_names), factory, reads_values=reads_values))
        return self

    def _check_new_name(self, name: str) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"node names must be non-empty strings, got {name!r}")
        if name in self._specs:
            raise ValueError(f"a node named {name!r} already exists in this topology")

    def _check_parents(self, name: str, parent_names: tuple[str, ...] | list[str]) -> None:
        if not parent_names:
            raise ValueError(f"node {name!r} needs at least one parent")
        if len(set(parent_names)) != len(parent_names):
            raise ValueError(f"node {name!r} lists a parent twice: {tuple(parent_names)}")
        for parent in parent_names:
            spec = self._specs.get(parent)
            if spec is None:
                raise ValueError(f"node {name!r}: unknown parent {parent!r}")
            if spec.kind == "sink":
                raise ValueError(f"node {name!r}: parent {parent!r} is a sink and cannot have children")

    def _add(self, spec: NodeSpec) -> None:
        self._specs[spec.name] = spec
        for parent in spec.parents:
            self._specs[parent].children.append(spec.name)

    # -- inspection -------------------------------------------------------------------------------------

    @property
    def specs(self) -> dict[str, NodeSpec]:
        return self._specs

    def source_topics(self) -> list[str]:
        return list(self._source_by_topic)

    def sink_topics(self) -> list[str]:
        return [spec.sink_topic for spec in self._specs.values() if spec.kind == "sink"]  # type: ignore[misc]

    def source_for_topic(self, topic: str) -> str | None:
        return self._source_by_topic.get(topic)

    def reads_values(self, topic: str) -> bool:
        """Whether any node looks at the values of the records read from `topic`. False when everything
        the topic's source feeds only counts records (windowed counts): a runtime may then leave those
        values undecoded and pass None, as Spark prunes a column that no expression uses."""
        source = self._source_by_topic.get(topic)
        if source is None:
            raise ValueError(f"topic {topic!r} is not an input of this topology")
        return any(self._specs[child].reads_values for child in self._specs[source].children)

    def validate(self) -> None:
        """Whole-graph checks that cannot run per call: something to read, every node reachable."""
        if not self._source_by_topic:
            raise ValueError("topology has no source")
        reachable: set[str] = set()
        stack = [spec.name for spec in self._specs.values() if spec.kind == "source"]
        while stack:
            name = stack.pop()
            if name not in reachable:
                reachable.add(name)
                stack.extend(self._specs[name].children)
        unreachable = [name for name in self._specs if name not in reachable]
        if unreachable:
            raise ValueError(f"nodes not connected to any source: {unreachable}")

    def describe(self) -> str:
        lines = []
        for spec in self._specs.values():
            target = f" topics={list(spec.topics)}" if spec.topics else ""
            target += f" topic={spec.sink_topic}" if spec.sink_topic else ""
            lines.append(f"{spec.kind} {spec.name}{target} <- {list(spec.parents)} -> {spec.children}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"Topology({len(self._specs)} nodes)"


def topology_fingerprint(topology: Topology) -> list[tuple[str, str, tuple[str, ...]]]:
    """Node names, kinds and parents: what must match between a snapshot and the topology restoring it."""
    return [(spec.name, spec.kind, spec.parents) for spec in topology.specs.values()]
