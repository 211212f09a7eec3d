"""KStream: a record stream. Predicates and mappers take (key, value); value-only mappers take (value)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from ..nodes.base import UserProcessorNode
from ..nodes.joins import LEFT, RIGHT, StreamStreamJoinNode, StreamTableJoinNode
from ..nodes.operators import (
    FilterNode,
    FlatMapNode,
    MapNode,
    MapValuesNode,
    PassThroughNode,
    PeekNode,
    SelectKeyNode,
)
from ..processor import Processor
from ..windows import JoinWindows
from .grouped import KGroupedStream

if TYPE_CHECKING:
    from .builder import StreamsBuilder
    from .ktable import KTable


def _callable(fn: Any, what: str) -> None:
    if not callable(fn):
        raise ValueError(f"{what} must be callable, got {fn!r}")


class KStream:
    def __init__(self, builder: StreamsBuilder, node_name: str) -> None:
        self.builder = builder
        self.node_name = node_name

    def _then(self, prefix: str, factory: Callable[[str], Any]) -> KStream:
        return KStream(self.builder, self.builder.add_node(prefix, factory, [self.node_name]))

    # -- stateless ----------------------------------------------------------------------------------------

    def filter(self, predicate: Callable[[Any, Any], Any]) -> KStream:
        _callable(predicate, "predicate")
        return self._then("KSTREAM-FILTER", lambda name: FilterNode(name, predicate, False))

    def filter_not(self, predicate: Callable[[Any, Any], Any]) -> KStream:
        _callable(predicate, "predicate")
        return self._then("KSTREAM-FILTER", lambda name: FilterNode(name, predicate, True))

    def map(self, mapper: Callable[[Any, Any], tuple]) -> KStream:
        _callable(mapper, "mapper")
        return self._then("KSTREAM-MAP", lambda name: MapNode(name, mapper))

    def map_values(self, mapper: Callable[[Any], Any]) -> KStream:
        _callable(mapper, "mapper")
        return self._then("KSTREAM-MAPVALUES", lambda name: MapValuesNode(name, mapper))

    def flat_map(self, mapper: Callable[[Any, Any], Iterable[tuple]]) -> KStream:
        _callable(mapper, "mapper")
        return self._then("KSTREAM-FLATMAP", lambda name: FlatMapNode(name, mapper, False))

    def flat_map_values(self, mapper: Callable[[Any], Iterable[Any]]) -> KStream:
        _callable(mapper, "mapper")
        return self._then("KSTREAM-FLATMAPVALUES", lambda name: FlatMapNode(name, mapper, True))

    def select_key(self, mapper: Callable[[Any, Any], Any]) -> KStream:
        _callable(mapper, "mapper")
        return self._then("KSTREAM-KEY-SELECT", lambda name: SelectKeyNode(name, mapper))

    def peek(self, action: Callable[[Any, Any], Any]) -> KStream:
        _callable(action, "action")
        return self._then("KSTREAM-PEEK", lambda name: PeekNode(name, action))

    def foreach(self, action: Callable[[Any, Any], Any]) -> None:
        _callable(action, "action")
        self._then("KSTREAM-FOREACH", lambda name: PeekNode(name, action, forward=False))

    def merge(self, other: KStream) -> KStream:
        if not isinstance(other, KStream) or other.builder is not self.builder:
            raise ValueError("merge needs a KStream of the same StreamsBuilder")
        name = self.builder.add_node("KSTREAM-MERGE", PassThroughNode, [self.node_name, other.node_name])
        return KStream(self.builder, name)

    def branch(self, *predicates: Callable[[Any, Any], Any]) -> list[KStream]:
        """One stream per predicate; a record goes to the first branch whose predicate it matches."""
        if not predicates:
            raise ValueError("branch needs at least one predicate")
        for predicate in predicates:
            _callable(predicate, "predicate")

        def first_match(index: int) -> Callable[[Any, Any], bool]:
            def matches(key: Any, value: Any) -> bool:
                for i, predicate in enumerate(predicates):
                    if predicate(key, value):
                        return i == index
                return False

            return matches

        def branch_factory(index: int) -> Callable[[str], FilterNode]:
            return lambda name: FilterNode(name, first_match(index), False)

        return [self._then("KSTREAM-BRANCHCHILD", branch_factory(i)) for i in range(len(predicates))]

    def process(self, processor_supplier: Callable[[], Processor]) -> KStream:
        """Attach a user Processor; the returned stream carries what it forwards."""
        _callable(processor_supplier, "processor_supplier")
        return self._then("KSTREAM-PROCESSOR", lambda name: UserProcessorNode(name, processor_supplier()))

    def to(self, topic: str) -> None:
        if not isinstance(topic, str) or not topic:
            raise ValueError(f"to() needs a topic name, got {topic!r}")
        self.builder.topology.add_sink(self.builder.new_name("KSTREAM-SINK"), topic, self.node_name)

    # -- grouping -----------------------------------------------------------------------------------------

    def group_by_key(self) -> KGroupedStream:
        return KGroupedStream(self.builder, self.node_name)

    def group_by(self, key_selector: Callable[[Any, Any], Any]) -> KGroupedStream:
        """Re-key with key_selector(key, value) -> new key, then group (processed in this task)."""
        return KGroupedStream(self.builder, self.select_key(key_selector).node_name)

    # -- joins --------------------------------------------------------------------------------------------

    def join(
        self,
        other: KStream | KTable,
        joiner: Callable[[Any, Any], Any],
        join_windows: JoinWindows | None = None,
    ) -> KStream:
        return self._join(other, joiner, join_windows, "inner")

    def left_join(
        self,
        other: KStream | KTable,
        joiner: Callable[[Any, Any], Any],
        join_windows: JoinWindows | None = None,
    ) -> KStream:
        return self._join(other, joiner, join_windows, "left")

    def outer_join(
        self, other: KStream, joiner: Callable[[Any, Any], Any], join_windows: JoinWindows
    ) -> KStream:
        if not isinstance(other, KStream):
            raise ValueError("outer_join is defined between two streams (use KTable.outer_join for tables)")
        return self._join(other, joiner, join_windows, "outer")

    def _join(
        self, other: Any, joiner: Callable[[Any, Any], Any], join_windows: JoinWindows | None, mode: str
    ) -> KStream:
        from .ktable import KTable

        _callable(joiner, "joiner")
        builder = self.builder
        if isinstance(other, KTable):
            if join_windows is not None:
                raise ValueError("a stream-table join takes no JoinWindows")
            if other.builder is not builder:
                raise ValueError("join needs a KTable of the same StreamsBuilder")
            table = other.getter_name
            return self._then(
                "KSTREAM-JOIN", lambda name: StreamTableJoinNode(name, table, joiner, mode == "left")
            )
        if not isinstance(other, KStream) or other.builder is not builder:
            raise ValueError("join needs a KStream or KTable of the same StreamsBuilder")
        if not isinstance(join_windows, JoinWindows):
            raise ValueError(
                "a stream-stream join needs JoinWindows, e.g. JoinWindows.of_time_difference_and_grace"
            )
        left_outer, right_outer = mode in ("left", "outer"), mode == "outer"
        this_name = builder.new_name("KSTREAM-JOINTHIS")
        other_name = builder.new_name("KSTREAM-JOINOTHER")
        builder.add_node(
            this_name,
            lambda name: StreamStreamJoinNode(
                name, LEFT, other_name, joiner, join_windows, left_outer, right_outer
            ),
            [self.node_name],
            explicit_name=True,
        )
        builder.add_node(
            other_name,
            lambda name: StreamStreamJoinNode(
                name, RIGHT, this_name, joiner, join_windows, right_outer, left_outer
            ),
            [other.node_name],
            explicit_name=True,
        )
        merged = builder.add_node("KSTREAM-MERGE", PassThroughNode, [this_name, other_name])
        return KStream(builder, merged)
