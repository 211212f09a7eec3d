"""Runtime nodes of joins (docs/semantics.md section 6).

A join reads state another node owns (the table's store, the other side's window store). It processes a
batch at a time where the task finds that state unchanged during the batch (`Node.state_reads`:
runtime/task.py runs it record by record otherwise), looking the batch up in the other node's store in one
call; its results come in the order of Kafka's record-by-record processing."""

from __future__ import annotations

from bisect import insort
from collections.abc import Callable, Iterator, Sequence
from itertools import accumulate
from typing import Any

from ..serde import key_bytes
from ..windows import JoinWindows
from .base import Batch, Node, StateRow, holds_none
from .kv_store import KeyValueStore, split_parts
from .late_rows import LateRows
from .window_stores import JoinWindowStore, Partners, WindowCounts, distinct_count

LEFT, RIGHT = 0, 1


class StreamJoinState:
    """State shared by the two sides of a stream-stream join (Kafka: two window stores, a shared time
    tracker and, for left/outer joins, the store of records still waiting for a partner)."""

    def __init__(self, windows: JoinWindows) -> None:
        self.windows = windows
        retention = windows.before + windows.after + windows.grace
        self.stream_time = -1
        self.stores = (JoinWindowStore("left", retention), JoinWindowStore("right", retention))
        self.stores[1].share_key_ids(self.stores[0])  # the sides look the same keys up
        self.next_seq = 0
        # records without partner yet: (ts, side order, key bytes, seq) -> (side, key, value), those waiting
        # keys sorted, and their count per timestamp
        self.waiting_store = KeyValueStore("wait")
        self.waiting: list[tuple[int, int, bytes, int]] = []
        self.waiting_counts = WindowCounts()

    def add_waiting(self, waiting_key: tuple[int, int, bytes, int], side: int, key: Any, value: Any) -> None:
        self.waiting_store.put(waiting_key, (side, key, value))
        insort(self.waiting, waiting_key)
        self.waiting_counts.add(waiting_key[0], None)

    def remove_waiting(self, waiting_key: tuple[int, int, bytes, int]) -> None:
        if self.waiting_store.delete(waiting_key) is not None:
            self.waiting.remove(waiting_key)
            self.waiting_counts.remove(waiting_key[0])

    def take_waiting(self, waiting_key: tuple[int, int, bytes, int]) -> tuple[int, Any, Any]:
        """Delete a waiting record from the store, leaving `waiting` to the caller (which cuts it);
        returns its `(side, key, value)`."""
        self.waiting_counts.remove(waiting_key[0])
        return self.waiting_store.delete(waiting_key)

    def state_rows(self) -> Iterator[StateRow]:
        """Each side's records (store `join_window:left`, `join_window:right`), then the records of a left
        or outer join waiting for a partner (`join_waiting:left`, `join_waiting:right`); a record's window
        is its timestamp."""
        for store in self.stores:
            name = f"join_window:{store.prefix}"
            for key, ts, value in store.items():
                yield StateRow(name, key, ts, ts, value, ts)
        entries = self.waiting_store.entries
        for waiting_key in self.waiting:
            side, key, value = entries[waiting_key]
            ts = waiting_key[0]
            yield StateRow(_WAITING_STORES[side], key, ts, ts, value, ts)

    def state_size(self) -> tuple[int, int]:
        """What `state_rows` lists, from the stores' counts: `(entries, distinct timestamps)`."""
        entries = self.stores[0].size() + self.stores[1].size() + self.waiting_counts.entries
        runs = self.stores[0].counts.stamps() + self.stores[1].counts.stamps()
        return entries, distinct_count(runs, self.waiting_counts.counts)

    # State parts: "" holds the clocks and the sequence, the stores' parts their entries.
    def _kv_stores(self) -> tuple[JoinWindowStore | KeyValueStore, ...]:
        return self.stores[0], self.stores[1], self.waiting_store

    def _scalars(self) -> tuple[int, int, int, int]:
        return self.stream_time, self.stores[0].store_time, self.stores[1].store_time, self.next_seq

    def export_parts(self, changed_only: bool) -> tuple[dict[str, Any], list[str]]:
        parts: dict[str, Any] = {"": self._scalars()}
        names = [""]
        for store in self._kv_stores():
            store_parts, store_names = store.export_parts(changed_only)
            parts.update(store_parts)
            names += store_names
        return parts, names

    def state_parts(self) -> dict[str, Any]:
        parts: dict[str, Any] = {"": self._scalars()}
        for store in self._kv_stores():
            parts.update(store.state_parts())
        return parts

    def apply_parts(self, parts: dict[str, Any], removed: list[str]) -> None:
        if "" in parts:
            self.stream_time, self.stores[0].store_time, self.stores[1].store_time, self.next_seq = parts.pop(
                ""
            )
        for store, (store_parts, store_removed) in split_parts(self._kv_stores(), parts, removed):
            store.apply_parts(store_parts, store_removed)
        self.waiting = sorted(self.waiting_store.entries)
        for window_store in self.stores:
            window_store.recount()
        self.waiting_counts.clear()
        for waiting_key in self.waiting:
            self.waiting_counts.add(waiting_key[0], None)


def _swapped(joiner: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """`joiner` called with its arguments the other way round."""
    return lambda this_value, other_value: joiner(other_value, this_value)


class StreamStreamJoinNode(Node):
    """One side of a stream-stream join. The left side owns the shared state; the right side borrows it."""

    drops_late = True

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
        # the joiner called as (this side's value, the other side's): the right side's swaps them back
        self._join = joiner if side == LEFT else _swapped(joiner)
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

    def state_reads(self) -> tuple[str, ...]:
        return (self.other_name,)  # the other side puts into the state this side fetches from

    def process_columns(self, keys, values, olds, timestamps, headers):
        """This side's records fetch their partners from the other side's store (unchanged during the
        batch), then go into this side's store (read only by the other side's records) in one call. An
        inner join, where no record waits for a partner, goes through the records that found one only."""
        state = self.state
        assert state is not None
        side, other = self.side, 1 - self.side
        n = len(keys)
        # for both sides' stores, numbered before the records without key or value are left out: a None key
        # is numbered -1 (or the batch gets no numbers), so that a batch without one is not read key by key
        # to find out (at many keys, a cache miss apiece); and whether every key is a str (the store then
        # saves them as one text)
        numbers, str_keys = state.stores[side].numbers_for(keys)
        null_keys = holds_none(keys) if numbers is None else len(numbers) > 0 and int(numbers.min()) < 0
        if not null_keys and not holds_none(values):  # every record has a key and a value
            valid: Sequence[int] = range(n)
            valid_keys, valid_values, valid_ts = list(keys), list(values), list(timestamps)
        else:
            valid = [i for i in range(n) if keys[i] is not None and values[i] is not None]
            valid_keys = [keys[i] for i in valid]
            valid_values = [values[i] for i in valid]
            valid_ts = [timestamps[i] for i in valid]
            if numbers is None:
                numbers, str_keys = state.stores[side].numbers_for(valid_keys)
            else:
                numbers = numbers[valid]
        partners = state.stores[other].fetch_batch(valid_keys, valid_ts, self.before, self.after, numbers)
        seqs = range(state.next_seq + 1, state.next_seq + 1 + len(valid))
        state.next_seq += len(valid)
        first_stream_time = state.stream_time
        if self.this_outer or self.other_outer:
            out = self._join_each(keys, values, timestamps, valid, partners, seqs)
            out_keys, out_values = [r[0] for r in out], [r[1] for r in out]
            out_ts, src = [r[2] for r in out], [r[3] for r in out]
        else:  # a result per partner, in the partners' order (record after record), in C passes
            src = partners.probes if type(valid) is range else list(map(valid.__getitem__, partners.probes))
            out_keys = list(map(keys.__getitem__, src))
            this_values = map(values.__getitem__, src)
            if side == LEFT:
                out_values = list(map(self.joiner, this_values, partners.values))
            else:
                out_values = list(map(self.joiner, partners.values, this_values))
            # the later of the two timestamps: a comparison per result (`max` is a call apiece)
            out_ts = [
                t if t > other_t else other_t
                for t, other_t in zip(map(timestamps.__getitem__, src), partners.stamps, strict=True)
            ]
            state.stream_time = max(first_stream_time, max(timestamps))
        if len(valid) < n:
            self.count_dropped(n - len(valid))
        expired = state.stores[side].put_batch(valid_keys, valid_values, valid_ts, seqs, str_keys, numbers)
        if expired:  # out of the store's retention (Kafka drops the put)
            # this node's stream time as each record was processed
            stream_times = list(accumulate(timestamps, max, initial=first_stream_time))
            late = LateRows()
            for at in expired:
                i = valid[at]
                late.add(i, keys[i], values[i], timestamps[i], None, None, stream_times[i + 1])
            late.report(self)
        if str_keys:
            self.task_context.str_key_column(out_keys)
        return Batch(
            out_keys,
            out_values,
            None,
            out_ts,
            None if headers is None else list(map(headers.__getitem__, src)),
            src,
        )

    def _join_each(self, keys, values, timestamps, valid, partners: Partners, seqs) -> list:
        """An outer side's results, record by record: a record without partner waits for one (or is
        emitted at once when its window has closed already), and the records whose window closed without
        a partner come out as the stream time passes them. Rows `(key, value, timestamp, input row)`."""
        state = self.state
        assert state is not None
        side, other, after = self.side, 1 - self.side, self.after
        out: list[tuple[Any, Any, int, int]] = []
        stream_time = state.stream_time
        probes, other_stamps, other_seqs, other_values = partners
        at = 0  # the next valid record
        first = 0  # its first partner
        for i in range(len(keys)):
            ts = timestamps[i]
            if ts > stream_time:
                stream_time = state.stream_time = ts
            if at == len(valid) or valid[at] != i:
                continue  # a null key or value: counted by the caller
            key, value, seq = keys[i], values[i], seqs[at]
            end = first
            while end < len(probes) and probes[end] == at:
                end += 1
            at += 1
            if ts == stream_time and state.waiting:
                self._emit_expired_waiting(out, i)
            for other_ts, other_seq, other_value in zip(
                other_stamps[first:end], other_seqs[first:end], other_values[first:end], strict=True
            ):
                if self.other_outer:  # the partner is no longer waiting for a join
                    state.remove_waiting((other_ts, _side_order(other), key_bytes(key), other_seq))
                out.append((key, self._join(value, other_value), max(ts, other_ts), i))
            if first == end and self.this_outer:
                if max(0, ts + after) < stream_time:  # its window has closed already: emit at once
                    out.append((key, self._join(value, None), ts, i))
                else:  # wait for a partner until the window closes
                    state.add_waiting((ts, _side_order(side), key_bytes(key), seq), side, key, value)
            first = end
        return out

    def _emit_expired_waiting(self, out: list, row: int) -> None:
        """Emit, in the waiting store's order, the records whose window closed without a partner."""
        state = self.state
        assert state is not None
        windows, waiting, stream_time = self.windows, state.waiting, state.stream_time
        # sorted by timestamp: past this bound no record's window has closed
        bound = stream_time - min(windows.after, windows.before) - windows.grace
        scanned = 0
        keep = []
        for waiting_key in waiting:
            if waiting_key[0] >= bound:
                break
            scanned += 1
            side = state.waiting_store.get(waiting_key)[0]
            look_back = windows.after if side == LEFT else windows.before
            if waiting_key[0] + look_back + windows.grace >= stream_time:
                keep.append(waiting_key)
                continue
            side, key, value = state.take_waiting(waiting_key)
            joined = self.joiner(value, None) if side == LEFT else self.joiner(None, value)
            out.append((key, joined, waiting_key[0], row))
        if scanned:
            waiting[:scanned] = keep

    def export_parts(self, changed_only):
        return self.state.export_parts(changed_only) if self.side == LEFT else None  # type: ignore[union-attr]

    def state_parts(self):
        return self.state.state_parts() if self.side == LEFT else None  # type: ignore[union-attr]

    def apply_parts(self, parts, removed):
        if self.side != LEFT:
            return super().apply_parts(parts, removed)
        self.state.apply_parts(parts, removed)  # type: ignore[union-attr]

    def state_rows(self) -> Iterator[StateRow]:
        return self.state.state_rows() if self.side == LEFT else iter(())  # type: ignore[union-attr]

    def state_size(self) -> tuple[int, int]:
        return self.state.state_size() if self.side == LEFT else (0, 0)  # type: ignore[union-attr]


_WAITING_STORES = ("join_waiting:left", "join_waiting:right")  # by side


def _side_order(side: int) -> int:
    """Kafka's outer-join store sorts right-side records before left-side ones at equal timestamps."""
    return 0 if side == RIGHT else 1


class StreamTableJoinNode(Node):
    """Stream-table join: each stream record looks up the table's current value; the result keeps the
    stream record's timestamp. A batch is looked up in the table in one call."""

    def __init__(self, name: str, table_name: str, joiner: Callable[[Any, Any], Any], left: bool) -> None:
        super().__init__(name)
        self.table_name = table_name
        self.joiner = joiner
        self.left = left

    def state_reads(self) -> tuple[str, ...]:
        return (self.table_name,)

    def process_columns(self, keys, values, olds, timestamps, headers):
        """The whole batch is looked up at once, None keys too (a None key has no entry): a batch whose
        every key the table has holds no None key, and its keys are not read one by one to find out (at
        many keys, a cache miss apiece). A record with a None key or value joins nothing: dropped."""
        n = len(keys)
        found, every_found = self.task_context.batch_values_getter(self.table_name)(keys)
        if (not every_found and holds_none(keys)) or holds_none(values):
            valid = [i for i in range(n) if keys[i] is not None and values[i] is not None]
            self.count_dropped(n - len(valid))
            src = valid if self.left else [i for i in valid if found[i] is not None]
            table_values = [found[i] for i in src]
        elif every_found or self.left:  # the table's values (None where it has none) in row order
            src, table_values = None, found
        else:
            src = [i for i, value in enumerate(found) if value is not None]
            table_values = [found[i] for i in src]
        if src is None:
            if every_found and self.task_context.table_str_keys(self.table_name):
                # every key found in a table of str keys: no windowed key among them
                self.task_context.str_key_column(keys)
            return Batch(keys, list(map(self.joiner, values, table_values)), None, timestamps, headers, None)
        return Batch(
            [keys[i] for i in src],
            list(map(self.joiner, map(values.__getitem__, src), table_values)),
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

    def getter_reads(self):
        return (self.this_parent, self.other_name)

    def get(self, key):
        this = self.task_context.value_getter(self.this_parent)(key)
        other = self.task_context.value_getter(self.other_name)(key)
        value = self._result(None if this is None else this[0], None if other is None else other[0])
        if value is None:
            return None
        return value, max(-1 if this is None else this[1], -1 if other is None else other[1])
