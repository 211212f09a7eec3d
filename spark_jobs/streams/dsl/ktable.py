"""KTable: a changelog stream seen as a table (latest value per key)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..nodes.joins import LEFT, RIGHT, TableTableJoinNode
from ..nodes.operators import PassThroughNode, TableFilterNode, TableGroupByNode, TableMapValuesNode
from ..nodes.suppress import SuppressNode
from ..suppress import Suppressed
from ..windows import AnyWindows, SessionWindows

if TYPE_CHECKING:
    from .builder import StreamsBuilder
    from .grouped import KGroupedTable
    from .kstream import KStream


class KTable:
    """`windows` is the window definition of the aggregation this table comes from (None if not windowed);
    `getter_name` is the node that answers value look-ups for this table (joins read it)."""

    def __init__(
        self,
        builder: StreamsBuilder,
        node_name: str,
        windows: AnyWindows | None = None,
        options: dict | None = None,
        parents: tuple[KTable, ...] = (),
        getter_name: str | None = None,
    ) -> None:
        self.builder = builder
        self.node_name = node_name
        self.windows = windows
        self.options = options if options is not None else {"send_old_values": False}
        self.parents = parents  # the tables whose changes this one's are made of, where it sends them on
        self.getter_name = getter_name or node_name

    def _enable_send_old_values(self) -> None:
        """Downstream suppress/group_by need old values; filters, mappers and joins pass the request to the
        tables they are made of (a join's old result is made of both sides' old values)."""
        self.options["send_old_values"] = True
        for parent in self.parents:
            parent._enable_send_old_values()

    def _derived(self, prefix: str, factory: Callable[[str, dict], Any]) -> KTable:
        options = {"send_old_values": False}
        name = self.builder.add_node(prefix, lambda n: factory(n, options), [self.node_name])
        return KTable(self.builder, name, self.windows, options, parents=(self,))

    def filter(self, predicate: Callable[[Any, Any], Any]) -> KTable:
        return self._filter(predicate, False)

    def filter_not(self, predicate: Callable[[Any, Any], Any]) -> KTable:
        return self._filter(predicate, True)

    def _filter(self, predicate: Callable[[Any, Any], Any], negate: bool) -> KTable:
        if not callable(predicate):
            raise ValueError(f"predicate must be callable, got {predicate!r}")
        parent = self.getter_name
        return self._derived(
            "KTABLE-FILTER",
            lambda n, options: TableFilterNode(n, predicate, negate, parent, options["send_old_values"]),
        )

    def map_values(self, mapper: Callable[[Any], Any]) -> KTable:
        if not callable(mapper):
            raise ValueError(f"mapper must be callable, got {mapper!r}")
        parent = self.getter_name
        return self._derived(
            "KTABLE-MAPVALUES",
            lambda n, options: TableMapValuesNode(n, mapper, parent, options["send_old_values"]),
        )

    def to_stream(self) -> KStream:
        from .kstream import KStream

        name = self.builder.add_node(
            "KTABLE-TOSTREAM", lambda n: PassThroughNode(n, drop_olds=True), [self.node_name]
        )
        return KStream(self.builder, name)

    def suppress(self, suppressed: Suppressed) -> KTable:
        if not isinstance(suppressed, Suppressed):
            raise ValueError(f"suppress takes a Suppressed, got {suppressed!r}")
        if suppressed.window_close:
            if self.windows is None:
                raise ValueError(
                    "suppress(until_window_closes) is only defined for windowed tables: "
                    "no windowed aggregation upstream of this KTable"
                )
            duration = self.windows.grace
            if isinstance(self.windows, SessionWindows):
                duration += self.windows.gap
        else:
            duration = suppressed.time_limit
        self._enable_send_old_values()
        parent = self.getter_name
        builder = self.builder
        name = suppressed.name or builder.new_name("KTABLE-SUPPRESS")
        options = {"send_old_values": False}  # set by the suppressed table's children, before the build
        builder.add_node(
            name,
            lambda n: SuppressNode(n, suppressed, duration, parent, options["send_old_values"]),
            [self.node_name],
            explicit_name=True,
        )
        return KTable(builder, name, self.windows, options)

    def group_by(self, selector: Callable[[Any, Any], tuple]) -> KGroupedTable:
        """Re-group: selector(key, value) -> (group key, value)."""
        from .grouped import KGroupedTable

        if not callable(selector):
            raise ValueError(f"selector must be callable, got {selector!r}")
        self._enable_send_old_values()
        name = self.builder.add_node(
            "KTABLE-SELECT", lambda n: TableGroupByNode(n, selector), [self.node_name]
        )
        return KGroupedTable(self.builder, name)

    def join(self, other: KTable, joiner: Callable[[Any, Any], Any]) -> KTable:
        return self._join(other, joiner, "inner")

    def left_join(self, other: KTable, joiner: Callable[[Any, Any], Any]) -> KTable:
        return self._join(other, joiner, "left")

    def outer_join(self, other: KTable, joiner: Callable[[Any, Any], Any]) -> KTable:
        return self._join(other, joiner, "outer")

    def _join(self, other: KTable, joiner: Callable[[Any, Any], Any], mode: str) -> KTable:
        if not isinstance(other, KTable) or other.builder is not self.builder:
            raise ValueError("a table join needs a KTable of the same StreamsBuilder")
        if not callable(joiner):
            raise ValueError(f"joiner must be callable, got {joiner!r}")
        builder = self.builder
        this_table, other_table = self.getter_name, other.getter_name
        this_name = builder.add_node(
            "KTABLE-JOINTHIS",
            lambda n: TableTableJoinNode(n, LEFT, other_table, joiner, mode, this_table),
            [self.node_name],
        )
        other_name = builder.add_node(
            "KTABLE-JOINOTHER",
            lambda n: TableTableJoinNode(n, RIGHT, this_table, joiner, mode, other_table),
            [other.node_name],
        )
        merged = builder.add_node("KTABLE-MERGE", PassThroughNode, [this_name, other_name])
        return KTable(builder, merged, getter_name=this_name, parents=(self, other))
