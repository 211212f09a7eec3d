"""What the engine promises about each output topic, read off the topology itself.

Data-quality checks derive their rules from these promises (spark_jobs/quality/derived.py), so a job the
project has never seen is checked by what its topology guarantees, with the figures it was built with.
Only promises that hold for every input are listed (docs/semantics.md):

- `WindowedUpdates`: a sink fed by a time-window aggregation (through filters and peeks only) gets its
  updates: each inside its window of `size`, never after window end + grace of the task's time
  (rule 4.2); per (key, window) the timestamp never goes back (4.3) and, for a count, nor does the value.
- `SuppressedFinals`: a sink fed by `suppress(until_window_closes)` of such an aggregation gets each
  (key, window) at most once, after the window closed (section 5). Per key, timestamps never go back only
  for tumbling windows: with hopping windows a later window's final can carry an earlier timestamp.
  `updates_topic` names a sink that gets the same aggregation's every update (no filter), if any: each
  final is then one of those updates, and no update of its window follows it.
- `DeclaredAggregates`: a sink fed by a declared aggregation (`agg(...)`, aggregates.py), directly or
  through its final suppress, gets values whose counts are at least 1 and whose `Min` is at most the
  `Max` of the same field and dtype; `per_update` (the aggregation's updates, not its finals): per group
  (key and window) counts and maxima never go down. Not promised: a mean between min and max (a float
  sum over a count can round past them).
- `AlignedGrid`: a sink fed by a processor that declares `promised_timestamp_grid()` gets timestamps on
  that grid (a user processor is opaque: it states its own promise).

A merge, a map or a join between the operator and the sink keeps no such promise, so none is listed.
"""

from __future__ import annotations

from dataclasses import dataclass

from .nodes.aggregations import TimeWindowAggregateNode
from .nodes.base import Node, UserProcessorNode
from .nodes.declared_aggregations import DeclaredStreamAggregateNode, DeclaredWindowAggregateNode
from .nodes.operators import FilterNode, PassThroughNode, PeekNode
from .nodes.suppress import SuppressNode
from .topology import Topology


@dataclass(frozen=True)
class WindowedUpdates:
    size: int
    advance: int
    grace: int
    counts: bool  # values are counts: they never go down per (key, window)


@dataclass(frozen=True)
class SuppressedFinals:
    size: int
    advance: int
    grace: int
    updates_topic: str | None

    @property
    def tumbling(self) -> bool:
        return self.advance == self.size


@dataclass(frozen=True)
class DeclaredAggregates:
    counts: tuple[str, ...]  # value fields that count records
    maxima: tuple[str, ...]
    ordered: tuple[tuple[str, str], ...]  # (min field, max field) of the same value field and dtype
    windowed: bool
    per_update: bool


def declared_promise(node: Node, per_update: bool) -> DeclaredAggregates:
    declared = node.declared  # type: ignore[attr-defined]
    by_kind: dict[str, list[tuple[str, str | None, str]]] = {}
    for name, aggregate in declared.items():
        by_kind.setdefault(aggregate.kind, []).append((name, aggregate.field, aggregate.dtype))
    ordered = tuple(
        (low, high)
        for low, field, dtype in by_kind.get("min", ())
        for high, other, other_dtype in by_kind.get("max", ())
        if (field, dtype) == (other, other_dtype)
    )
    return DeclaredAggregates(
        tuple(name for name, _, _ in by_kind.get("count", ())),
        tuple(name for name, _, _ in by_kind.get("max", ())),
        ordered,
        isinstance(node, DeclaredWindowAggregateNode),
        per_update,
    )


@dataclass(frozen=True)
class AlignedGrid:
    interval: int
    shift: int


Promise = WindowedUpdates | SuppressedFinals | DeclaredAggregates | AlignedGrid
_WINDOW_AGGREGATES = (TimeWindowAggregateNode, DeclaredWindowAggregateNode)

# Nodes that forward a subset of their input unchanged: per-key and per-window promises survive them.
_TRANSPARENT = (FilterNode, PeekNode, PassThroughNode)


def topic_promises(topology: Topology) -> dict[str, list[Promise]]:
    """Every sink topic of `topology` -> the promises that hold for it (possibly none)."""
    specs = topology.specs
    nodes: dict[str, Node] = {name: spec.factory() for name, spec in specs.items()}

    def origin(name: str) -> tuple[str, bool]:
        """The first node above `name` that is not transparent, and whether a filter was passed."""
        filtered = False
        while isinstance(nodes[name], _TRANSPARENT) and len(specs[name].parents) == 1:
            filtered = filtered or isinstance(nodes[name], FilterNode)
            name = specs[name].parents[0]
        return name, filtered

    sinks = [spec for spec in specs.values() if spec.kind == "sink"]
    origins = {spec.name: origin(spec.parents[0]) for spec in sinks if len(spec.parents) == 1}
    unfiltered_updates: dict[str, str] = {}  # aggregation node -> a sink topic with all its updates
    for spec in sinks:
        found = origins.get(spec.name)
        if found and not found[1] and isinstance(nodes[found[0]], _WINDOW_AGGREGATES):
            unfiltered_updates.setdefault(found[0], spec.sink_topic)

    promises: dict[str, list[Promise]] = {spec.sink_topic: [] for spec in sinks}
    for spec in sinks:
        found = origins.get(spec.name)
        if found is None:
            continue
        node = nodes[found[0]]
        if isinstance(node, _WINDOW_AGGREGATES):
            windows = node.windows
            counts = isinstance(node, TimeWindowAggregateNode) and node.aggregation.kind == "count"
            promises[spec.sink_topic].append(
                WindowedUpdates(windows.size, windows.advance, windows.grace, counts)
            )
        if isinstance(node, (DeclaredWindowAggregateNode, DeclaredStreamAggregateNode)):
            promises[spec.sink_topic].append(declared_promise(node, per_update=True))
        elif isinstance(node, SuppressNode) and node.window_close:
            upstream, _ = origin(specs[found[0]].parents[0])
            aggregation = nodes[upstream]
            if isinstance(aggregation, _WINDOW_AGGREGATES):
                windows = aggregation.windows
                promises[spec.sink_topic].append(
                    SuppressedFinals(
                        windows.size, windows.advance, windows.grace, unfiltered_updates.get(upstream)
                    )
                )
            if isinstance(aggregation, DeclaredWindowAggregateNode):
                promises[spec.sink_topic].append(declared_promise(aggregation, per_update=False))
        elif isinstance(node, UserProcessorNode):
            declare = getattr(node.processor, "promised_timestamp_grid", None)
            grid = declare() if callable(declare) else None
            if grid is not None:
                interval, shift = grid
                promises[spec.sink_topic].append(AlignedGrid(int(interval), int(shift) % int(interval)))
    return promises
