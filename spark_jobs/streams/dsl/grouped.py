"""Grouped streams and tables: the aggregations of the DSL."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..aggregates import DeclaredAggregate, check_declarations
from ..nodes.aggregations import (
    Aggregation,
    SessionWindowAggregateNode,
    SlidingWindowAggregateNode,
    StreamAggregateNode,
    TableAggregateNode,
    TimeWindowAggregateNode,
)
from ..nodes.declared_aggregations import (
    AggregateLayout,
    DeclaredStreamAggregateNode,
    DeclaredWindowAggregateNode,
    session_aggregation,
)
from ..windows import AnyWindows, SessionWindows, SlidingWindows, TimeWindows
from .ktable import KTable

if TYPE_CHECKING:
    from .builder import StreamsBuilder


def _check_callables(**functions: Any) -> None:
    for name, fn in functions.items():
        if not callable(fn):
            raise ValueError(f"{name} must be callable, got {fn!r}")


class KGroupedStream:
    """`count()`, `reduce(reducer)` (reducer(agg, value)), `aggregate(initializer, aggregator)`
    (aggregator(key, value, agg)), or `windowed_by(windows)` first."""

    def __init__(self, builder: StreamsBuilder, node_name: str) -> None:
        self.builder = builder
        self.node_name = node_name

    def count(self) -> KTable:
        return self._aggregate(Aggregation.count())

    def reduce(self, reducer: Callable[[Any, Any], Any]) -> KTable:
        _check_callables(reducer=reducer)
        return self._aggregate(Aggregation.reduce(reducer))

    def aggregate(self, initializer: Callable[[], Any], aggregator: Callable[[Any, Any, Any], Any]) -> KTable:
        _check_callables(initializer=initializer, aggregator=aggregator)
        return self._aggregate(Aggregation.aggregate(initializer, aggregator))

    def _aggregate(self, aggregation: Aggregation) -> KTable:
        name = self.builder.add_node(
            "KSTREAM-AGGREGATE", lambda n: StreamAggregateNode(n, aggregation), [self.node_name]
        )
        return KTable(self.builder, name)

    def agg(self, **declared: DeclaredAggregate) -> KTable:
        """Declared aggregations (spark_jobs/streams/aggregates.py), e.g. `agg(n=Count(), total=Sum("v"))`:
        per key a dict of the declared names, computed without a Python call per record."""
        declared = check_declarations(declared)
        name = self.builder.add_node(
            "KSTREAM-AGGREGATE", lambda n: DeclaredStreamAggregateNode(n, declared), [self.node_name]
        )
        return KTable(self.builder, name)

    def windowed_by(self, windows: AnyWindows) -> WindowedKStream:
        if not isinstance(windows, (TimeWindows, SessionWindows, SlidingWindows)):
            raise ValueError(
                f"windowed_by takes TimeWindows, SessionWindows or SlidingWindows, got {windows!r}"
            )
        return WindowedKStream(self.builder, self.node_name, windows)


class WindowedKStream:
    """A grouped stream with windows; its aggregations give a windowed KTable (keys are `Windowed`).

    Session windows merge sessions: `aggregate` then needs `merger(key, agg1, agg2)` too.
    """

    def __init__(self, builder: StreamsBuilder, node_name: str, windows: AnyWindows) -> None:
        self.builder = builder
        self.node_name = node_name
        self.windows = windows

    def count(self) -> KTable:
        return self._aggregate(Aggregation.count())

    def reduce(self, reducer: Callable[[Any, Any], Any]) -> KTable:
        _check_callables(reducer=reducer)
        return self._aggregate(Aggregation.reduce(reducer))

    def aggregate(
        self,
        initializer: Callable[[], Any],
        aggregator: Callable[[Any, Any, Any], Any],
        merger: Callable[[Any, Any, Any], Any] | None = None,
    ) -> KTable:
        _check_callables(initializer=initializer, aggregator=aggregator)
        if isinstance(self.windows, SessionWindows) and merger is None:
            raise ValueError("aggregate over SessionWindows needs merger(key, agg1, agg2) to merge sessions")
        return self._aggregate(Aggregation.aggregate(initializer, aggregator, merger=merger))

    def agg(self, **declared: DeclaredAggregate) -> KTable:
        """Declared aggregations (spark_jobs/streams/aggregates.py) per key and window, e.g.
        `agg(n=Count(), top=Max("v"))`: over time windows computed without a Python call per record; over
        session windows as a user aggregate with a merger, called once per record by the session store's
        batch merge (sessions merge per key)."""
        declared = check_declarations(declared)
        windows = self.windows
        if isinstance(windows, SessionWindows):
            return self._aggregate(session_aggregation(AggregateLayout(declared)))
        if not isinstance(windows, TimeWindows):
            raise ValueError(f"agg takes TimeWindows or SessionWindows, got {windows!r}")
        options = {"send_old_values": False}

        def factory(name: str) -> Any:
            return DeclaredWindowAggregateNode(name, windows, declared, options["send_old_values"])

        name = self.builder.add_node("KSTREAM-AGGREGATE", factory, [self.node_name])
        return KTable(self.builder, name, windows=windows, options=options)

    def _aggregate(self, aggregation: Aggregation) -> KTable:
        windows = self.windows
        options = {"send_old_values": False}
        if isinstance(windows, TimeWindows):

            def factory(name: str) -> Any:
                return TimeWindowAggregateNode(name, windows, aggregation, options["send_old_values"])
        elif isinstance(windows, SessionWindows):

            def factory(name: str) -> Any:
                return SessionWindowAggregateNode(name, windows, aggregation)
        else:

            def factory(name: str) -> Any:
                return SlidingWindowAggregateNode(name, windows, aggregation)

        # A count of time windows never looks at values (session and sliding windows: not verified).
        counts_only = isinstance(windows, TimeWindows) and aggregation.kind == "count"
        name = self.builder.add_node(
            "KSTREAM-AGGREGATE", factory, [self.node_name], reads_values=not counts_only
        )
        return KTable(self.builder, name, windows=windows, options=options)


class KGroupedTable:
    """A re-grouped table: `count()`, `reduce(adder, subtractor)` (each (agg, value) -> agg),
    `aggregate(initializer, adder, subtractor)` (each (key, value, agg) -> agg)."""

    def __init__(self, builder: StreamsBuilder, node_name: str) -> None:
        self.builder = builder
        self.node_name = node_name

    def count(self) -> KTable:
        return self._aggregate(Aggregation.count())

    def reduce(self, adder: Callable[[Any, Any], Any], subtractor: Callable[[Any, Any], Any]) -> KTable:
        _check_callables(adder=adder, subtractor=subtractor)
        return self._aggregate(Aggregation.reduce(adder, subtractor))

    def aggregate(
        self,
        initializer: Callable[[], Any],
        adder: Callable[[Any, Any, Any], Any],
        subtractor: Callable[[Any, Any, Any], Any],
    ) -> KTable:
        _check_callables(initializer=initializer, adder=adder, subtractor=subtractor)
        return self._aggregate(Aggregation.aggregate(initializer, adder, subtractor))

    def _aggregate(self, aggregation: Aggregation) -> KTable:
        name = self.builder.add_node(
            "KTABLE-AGGREGATE", lambda n: TableAggregateNode(n, aggregation), [self.node_name]
        )
        return KTable(self.builder, name)
