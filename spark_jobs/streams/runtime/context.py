"""TaskContext: the one narrow view of its task that runtime nodes and punctuation use.

Nodes read the task's clocks, partition and current topic, count dropped records, schedule punctuation
and look up the value getters of the tables they join with through it, never through the task itself, so
the task's internals can change without touching the nodes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..processor import Cancellable, PunctuationType
    from ..timeutil import Duration
    from .task import StreamTask


class TaskContext:
    __slots__ = ("_task",)

    def __init__(self, task: StreamTask) -> None:
        self._task = task

    @property
    def stream_time(self) -> int:
        """Max valid record timestamp so far, -1 while unknown."""
        return self._task.stream_time

    @property
    def wall_clock(self) -> int:
        return self._task.wall_clock

    @property
    def partition(self) -> int:
        return self._task.partition

    @property
    def current_topic(self) -> str | None:
        """The input topic of the records being processed; None inside a punctuator."""
        return self._task.current_topic

    def count_dropped(self, n: int = 1) -> None:
        """Count records dropped (dropped-records-total)."""
        self._task.dropped_records += n

    def count_late(
        self,
        node_name: str,
        rows: Sequence[int],
        keys: Sequence[Any],
        values: Sequence[Any],
        timestamps: Sequence[int],
        window_starts: Sequence[int | None] | None,
        window_ends: Sequence[int | None] | None,
        stream_times: Sequence[int] | None = None,
    ) -> None:
        """Records node `node_name` dropped as late (Node.count_late): counted as dropped, and kept by the
        task's LateKeeper with the input record each descends from."""
        task = self._task
        task.dropped_records += len(rows)
        task.late.add(
            node_name,
            task.current_topic,
            task.partition,
            rows,
            keys,
            values,
            timestamps,
            window_starts,
            window_ends,
            stream_times,
        )

    def schedule(
        self,
        node_name: str,
        interval: Duration,
        punctuation_type: PunctuationType,
        punctuator: Callable[[int], Any],
        time_shift: Duration | None = None,
    ) -> Cancellable:
        return self._task.punctuation.schedule(node_name, interval, punctuation_type, punctuator, time_shift)

    def value_getter(self, node_name: str) -> Callable[[Any], tuple[Any, int] | None]:
        """The KTable value getter of node `node_name`: key -> (value, timestamp) or None."""
        return self._task.nodes[node_name].get

    def batch_values_getter(self, node_name: str) -> Callable[[list], tuple[list, bool]]:
        """Node `node_name`'s KTable values over a batch: keys -> per key its value or None (without the
        timestamps, which a stream-table join does not read), and whether the table has every key."""
        return self._task.nodes[node_name].get_values

    def table_str_keys(self, node_name: str) -> bool:
        """Whether every key the table of node `node_name` holds is a str (`Node.str_keys`)."""
        return self._task.nodes[node_name].str_keys()

    def str_key_column(self, keys: list) -> None:
        """A node's word that `keys`, a key column it outputs, holds keys of type str only: an output batch
        whose keys are that very list then finds no windowed key among them without reading each key
        (at many keys, a cache miss per row). Only until the task's next batch."""
        self._task.key_splits.append((keys, (keys, None, None)))

    def windowed_key_column(self, keys: list, inner: list, starts: list, ends: list) -> None:
        """A node's word that `keys`, a key column it outputs, holds `Windowed` keys only, whose keys, window
        starts and window ends are `inner`, `starts` and `ends` (lists of its length): an output batch whose
        keys are that very list takes those as its columns instead of splitting each key (at many keys, a
        cache miss per row). Only until the task's next batch."""
        self._task.key_splits.append((keys, (inner, starts, ends)))

    def join_state(self, node_name: str) -> Any:
        """The join buffers that the two sides of a stream-stream join share (owned by the left side)."""
        return self._task.nodes[node_name].state  # type: ignore[attr-defined]
