"""Runtime nodes of joins (docs/semantics.md section 6). Joins read state other nodes own, so they always run
record by record (`columnar = False`)."""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from collections.abc import Callable
from typing import Any

from ..serde import key_bytes
from ..windows import JoinWindows
from .base import Batch, Node

LEFT, RIGHT = 0, 1


class StreamJoinState:
    """State shared by the two sides of a stream-stream join (Kafka: two window stores, a shared time
    tracker and, for left/outer joins, the store of records still waiting for a partner)."""

    def __init__(self, windows: JoinWindows) -> None:
        self.windows = windows
        self.retention = windows.before + windows.after + windows.grace
        self.stream_time = -1
        self.store_time = [-1, -1]  # each window store's own clock (max timestamp put)
        self.stores: list[dict[Any, list[tuple[int, int, Any]]]] = [{}, {}]  # key -> sorted (ts, seq, value)
        self.next_seq = 0
        # records without partner yet: sorted (ts, side order, key bytes, seq) -> (side, key, value)
        self.waiting: list[tuple[int, int, bytes, int]] = []
        self.waiting_rows: dict[tuple[int, int, bytes, int], tuple[int, Any, Any]] = {}

    def put(self, side: int, key: Any, value: Any, ts: int) -> tuple[bool, int]:
        """Store a record in its side's window store; returns (stored, sequence number)."""
        self.next_seq += 1
        if ts > self.store_time[side]:
            self.store_time[side] = ts
        if ts <= self.store_time[side] - self.retention:
            return False, self.next_seq  # expired segment: not stored (Kafka counts it as dropped)
        insort(self.stores[side].setdefault(key, []), (ts, self.next_seq, value))
        return True, self.next_seq

    def fetch(self, side: int, key: Any, time_from: int, time_to: int) -> list[tuple[int, int, Any]]:
        rows = self.stores[side].get(key)
        if not rows:
            return []
        time_from = max(time_from, self.store_time[side] - self.retention + 1)
        limit = self.store_time[side] - self.retention
        cut = bisect_right(rows, (limit, float("inf")))
        if cut:  # drop expired rows for good
            del rows[:cut]
        return rows[bisect_left(rows, (time_from,)) : bisect_right(rows, (time_to, float("inf")))]

    def snapshot(self) -> Any:
        return {
            "scalars": (self.stream_time, self.store_time, self.next_seq),
            "stores": self.stores,
            "waiting": self.waiting_rows,
        }

    def restore(self, state: Any) -> None:
        self.stream_time, self.store_time, self.next_seq = state["scalars"]
        self.stores = state["stores"]
        self.waiting_rows = state["waiting"]
        self.waiting = sorted(self.waiting_rows)


class StreamStreamJoinNode(Node):
    """One side of a stream-stream join. The left side owns the shared state; the right side borrows it."""

    columnar = False

    def __init__(
        self,
        name: str,
        side: int,
        other_name: str,
        joiner: Callable[[Any, Any], Any],
        windows: JoinWindows,
        this_outer: bool,
        other_outer: bool,
    ) -> None:
        super().__init__(name)
        self.side = side
        self.other_name = other_name
        self.joiner = joiner
        self.windows = windows
        # Kafka swaps before/after for the right side.
        self.before, self.after = (
            (windows.before, windows.after) if side == LEFT else (windows.after, windows.before)
        )
        self.this_outer = this_outer  # emit (this, None) when no partner arrives in time
        self.other_outer = other_outer
        self.state: StreamJoinState | None = StreamJoinState(windows) if side == LEFT else None

    def init(self, task_context) -> None:
        super().init(task_context)
        if self.state is None:
            self.state = task_context.join_state(self.other_name)

    def _join(self, this_value: Any, other_value: Any) -> Any:
        return (
            self.joiner(this_value, other_value)
            if self.side == LEFT
            else self.joiner(other_value, this_value)
        )

    def process_columns(self, keys, values, olds, timestamps, headers):
        state = self.state
        assert state is not None
        out: list[tuple[Any, Any, int, int]] = []
        for i in range(len(keys)):
            key, value, ts = keys[i], values[i], timestamps[i]
            if ts > state.stream_time:
                state.stream_time = ts
            if key is None or value is None:
                self.count_dropped()
                continue
            if ts == state.stream_time:
                self._emit_expired_waiting(out, i)
            time_from, time_to = max(0, ts - self.before), max(0, ts + self.after)
            other = 1 - self.side
            partners = state.fetch(other, key, time_from, time_to)
            for other_ts, seq, other_value in partners:
                if self.other_outer:  # the partner is no longer waiting for a join
                    waiting_key = (other_ts, _side_order(other), key_bytes(key), seq)
                    if state.waiting_rows.pop(waiting_key, None) is not None:
                        state.waiting.remove(waiting_key)
                out.append((key, self._join(value, other_value), max(ts, other_ts), i))
            stored, seq = state.put(self.side, key, value, ts)
            if not stored:
                self.count_dropped()
            if not partners and self.this_outer:
                if time_to < state.stream_time:  # its window has closed already: emit at once
                    out.append((key, self._join(value, None), ts, i))
                else:  # wait for a partner until the window closes
                    waiting_key = (ts, _side_order(self.side), key_bytes(key), seq)
                    state.waiting_rows[waiting_key] = (self.side, key, value)
                    insort(state.waiting, waiting_key)
        return Batch(
            [r[0] for r in out],
            [r[1] for r in out],
            None,
            [r[2] for r in out],
            None if headers is None else [headers[r[3]] for r in out],
            [r[3] for r in out],
        )

    def _emit_expired_waiting(self, out: list, row: int) -> None:
        state = self.state
        assert state is not None
        windows, keep = self.windows, []
        for waiting_key in state.waiting:
            side, key, value = state.waiting_rows[waiting_key]
            look_back = windows.after if side == LEFT else windows.before
            if waiting_key[0] + look_back + windows.grace >= state.stream_time:
                keep.append(waiting_key)
                continue
            del state.waiting_rows[waiting_key]
            joined = self.joiner(value, None) if side == LEFT else self.joiner(None, value)
            out.append((key, joined, waiting_key[0], row))
        state.waiting[:] = keep

    def snapshot_state(self):
        return self.state.snapshot() if self.side == LEFT else None  # type: ignore[union-attr]

    def restore_state(self, state):
        self.state.restore(state)  # type: ignore[union-attr]


def _side_order(side: int) -> int:
    """Kafka's outer-join store sorts right-side records before left-side ones at equal timestamps."""
    return 0 if side == RIGHT else 1


class StreamTableJoinNode(Node):
    """Stream-table join: each stream record looks up the table's current value; the result keeps the
    stream record's timestamp."""

    columnar = False

    def __init__(self, name: str, table_name: str, joiner: Callable[[Any, Any], Any], left: bool) -> None:
        super().__init__(name)
        self.table_name = table_name
        self.joiner = joiner
        self.left = left

    def process_columns(self, keys, values, olds, timestamps, headers):
        table_get = self.task_context.value_getter(self.table_name)
        out_k: list = []
        out_v: list = []
        src: list = []
        for i in range(len(keys)):
            key, value = keys[i], values[i]
            if key is None or value is None:
                self.count_dropped()
                continue
            found = table_get(key)
            if found is None and not self.left:
                continue
            out_k.append(key)
            out_v.append(self.joiner(value, None if found is None else found[0]))
            src.append(i)
        return Batch(
            out_k,
            out_v,
            None,
            [timestamps[i] for i in src],
            None if headers is None else [headers[i] for i in src],
            src,
        )


class TableTableJoinNode(Node):
    """One side of a table-table join: `inner`, `left` or `outer`. The result timestamp is the max of both
    sides' timestamps; a delete yields a tombstone only if the join had a result."""

    columnar = False

    def __init__(
        self,
        name: str,
        side: int,
        other_name: str,
        joiner: Callable[[Any, Any], Any],
        mode: str,
        this_parent: str,
    ) -> None:
        super().__init__(name)
        self.side = side
        self.other_name = other_name
        self.this_parent = this_parent
        self.joiner = joiner
        self.mode = mode

    def _result(self, this_value: Any, other_value: Any) -> Any:
        left, right = (this_value, other_value) if self.side == LEFT else (other_value, this_value)
        if left is None and right is None:
            return None
        if self.mode == "inner" and (left is None or right is None):
            return None
        if self.mode == "left" and left is None:
            return None
        return self.joiner(left, right)

    def process_columns(self, keys, values, olds, timestamps, headers):
        other_get = self.task_context.value_getter(self.other_name)
        out_k: list = []
        out_v: list = []
        out_o: list = []
        out_t: list = []
        src: list = []
        for i in range(len(keys)):
            key = keys[i]
            found = other_get(key)
            other_value = None if found is None else found[0]
            new = self._result(values[i], other_value)
            old = self._result(None if olds is None else olds[i], other_value)
            if new is None and old is None:
                continue
            out_k.append(key)
            out_v.append(new)
            out_o.append(old)
            out_t.append(timestamps[i] if found is None else max(timestamps[i], found[1]))
            src.append(i)
        return Batch(out_k, out_v, out_o, out_t, None if headers is None else [headers[i] for i in src], src)

    def get(self, key):
        this = self.task_context.value_getter(self.this_parent)(key)
        other = self.task_context.value_getter(self.other_name)(key)
        value = self._result(None if this is None else this[0], None if other is None else other[0])
        if value is None:
            return None
        return value, max(-1 if this is None else this[1], -1 if other is None else other[1])
