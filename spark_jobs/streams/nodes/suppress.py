"""The suppress node: the emit policy over its TimeOrderedKeyValueBuffer (docs/semantics.md section 5)."""

from __future__ import annotations

from heapq import heappush
from itertools import repeat
from typing import Any

from ..records import Windowed
from ..serde import headers_size, key_bytes, value_size, window_start_bytes
from ..suppress import SHUT_DOWN, BufferFullError, Suppressed
from ..timeutil import INT64_MAX
from .base import Batch, Node
from .time_ordered_buffer import (
    _HDR,
    _NEW,
    _OLD,
    _PRIOR,
    _SIZE,
    _TS,
    NO_WINDOW,
    TimeOrderedKeyValueBuffer,
)

_NEVER = float("inf")


class SuppressNode(Node):
    """The emit policy of suppress over its TimeOrderedKeyValueBuffer: puts every update, emits the entries
    whose buffer time has passed (observed time - D), then enforces the capacity (emit early or shut down),
    and keeps the buffer's size metrics. The put of an update is inlined here: it runs once per record."""

    def __init__(self, name: str, suppressed: Suppressed, duration: int, parent_name: str) -> None:
        super().__init__(name)
        self.window_close = suppressed.window_close
        self.duration = duration  # D: time limit, or the upstream window's grace (+ gap for sessions)
        config = suppressed.buffer_config
        self.max_records = INT64_MAX if config.records_limit is None else config.records_limit
        self.max_bytes = INT64_MAX if config.bytes_limit is None else config.bytes_limit
        self.shut_down = config.policy == SHUT_DOWN
        self.parent_name = parent_name
        self.observed = -1
        self.buffer = TimeOrderedKeyValueBuffer(self.window_close)
        self.count = 0
        self.num_bytes = 0
        self.next_seq = 0
        # Metric samples are taken after every put and every eviction pass, plus one at init (as Kafka).
        self.samples = 1
        self.size_sum = self.count_sum = 0
        self.size_max = self.count_max = 0

    def process_columns(self, keys, values, olds, timestamps, headers):
        buffer = self.buffer
        buckets, heap, log_puts, log_touch = buffer.buckets, buffer.heap, buffer.log.puts, buffer.log.touch
        pop_due, pop_head = buffer.pop_due, buffer.pop_head
        bucket_window: Any = NO_WINDOW
        # until_time_limit: the bucket {inner key: entry}, and the entries put into it since the last state
        # export (the export reads them there, fresh and adjacent in memory)
        bucket: Any = {}
        puts: dict = {}
        # until_window_closes: the bucket window's rows (WindowRows), their index and columns
        index: dict = {}
        row_keys: list = []
        dirty = bytearray()
        c_ts = c_size = c_base = c_new = c_old = c_prior = c_hdr = dirty
        row = None
        # the length of the bucket window's start serialized: the suffix of its windowed keys' bytes
        suffix_len = 0
        observed, duration = self.observed, self.duration
        window_close = self.window_close
        max_records, max_bytes = self.max_records, self.max_bytes
        bounded = max_records < INT64_MAX or max_bytes < INT64_MAX
        evict_at = heap[0][0] + duration if heap else _NEVER  # observed time at which the head goes out
        # observed >= evict_at can only become true when observed time advances or an insert lowers
        # evict_at: test it there, not per row (comparing large ints is a slow generic call in CPython)
        due = observed >= evict_at
        count, num_bytes, seq = self.count, self.num_bytes, self.next_seq
        samples, size_sum, count_sum = self.samples, self.size_sum, self.count_sum
        # Each put's sample adds the buffer's size and count to the sums. They change only on an insert, a
        # put that resizes an entry, or an eviction, so the samples of rows [mark, i) are added in one go
        # there (and at the end): rows that only update an entry in place do no arithmetic for them.
        mark = 0
        size_max, count_max = self.size_max, self.count_max
        topic = self.task_context.current_topic
        context_size = 20 + (len(topic) if topic else 0)  # timestamp, offset, partition + topic name
        vsize = value_size
        out_k: list = []
        out_v: list = []
        out_o: list = []
        out_t: list = []
        out_h: list | None = None if headers is None else []
        src: list = []
        rows = zip(
            range(len(keys)),
            keys,
            values,
            repeat(None) if olds is None else olds,
            timestamps,
            repeat(None) if headers is None else headers,
            strict=False,
        )
        for i, key, new, old, ts, hdr in rows:
            if ts > observed:
                observed = ts
                if observed >= evict_at:
                    due = True
            new_size = 8 if type(new) is int else vsize(new)
            if window_close:
                window, inner = key[1], key[0]
            else:
                window, inner = None, key
            if window is not bucket_window:
                bucket = buckets.get(window)
                if bucket is None:
                    if window_close:  # the heap of an until_window_closes buffer holds its windows
                        bucket = buffer.open_window(window)
                        if window[1] + duration < evict_at:
                            evict_at = window[1] + duration
                            if observed >= evict_at:
                                due = True
                    else:
                        bucket = buckets[window] = {}
                bucket_window = window
                if window_close:
                    log_touch(window)
                    index, row_keys, dirty = bucket.index, bucket.keys, bucket.dirty
                    c_ts, c_size, c_new, c_old, c_hdr, c_base, c_prior = bucket.columns
                    suffix_len = len(window_start_bytes(window[0]))
                else:
                    puts = log_puts(window)
            if window_close:
                row = index.get(inner)
                entry = None
            else:
                entry = bucket.get(inner)
            if row is None and entry is None:
                size_sum += num_bytes * (i - mark)
                count_sum += count * (i - mark)
                mark = i
                # buffer time, key and prior value: fixed while the key stays buffered; the first update's
                # old value is the prior value, counted once
                base = 8 + (8 if type(old) is int else vsize(old))
                if window_close:  # the window's end is the buffer time; key bytes are computed at emit
                    bt = kb = None
                    if type(key) is Windowed:  # len(key_bytes(key)), with the suffix's length known
                        base += len(inner.encode()) if type(inner) is str else len(key_bytes(inner))
                        base += suffix_len
                    else:
                        base += len(key_bytes(key))
                else:
                    bt, kb = ts, key_bytes(key)
                    base += len(kb)
                    heappush(heap, (ts, kb, seq, inner))
                    if ts + duration < evict_at:
                        evict_at = ts + duration
                        if observed >= evict_at:
                            due = True
                size = base + new_size + context_size + (headers_size(hdr) if hdr else 0)
                if window_close:  # a row (WindowRows.append, inlined: ENTRY_COLUMNS)
                    index[inner] = len(row_keys)
                    row_keys.append(inner)
                    c_ts.append(ts)
                    c_size.append(size)
                    c_base.append(base)
                    c_new.append(new)
                    c_old.append(old)
                    c_prior.append(old)
                    c_hdr.append(hdr)
                    dirty.append(1)
                else:
                    bucket[inner] = puts[inner] = (bt, kb, new, old, old, ts, hdr, size, seq, base)
                seq += 1
                count += 1
                num_bytes += size
                # the maxima only move when a put makes the buffer larger
                if count > count_max:
                    count_max = count
                if num_bytes > size_max:
                    size_max = num_bytes
            else:
                if window_close:
                    base, prior, grown = c_base[row], c_prior[row], -c_size[row]
                else:  # entry fields by position (see _BT.._BASE): this runs once per buffered update
                    base, prior, grown = entry[9], entry[4], -entry[7]  # _BASE, _PRIOR, _SIZE
                size = base + new_size + context_size + (headers_size(hdr) if hdr else 0)
                if old != prior:
                    size += 8 if type(old) is int else vsize(old)
                grown += size
                if grown:
                    size_sum += num_bytes * (i - mark)
                    count_sum += count * (i - mark)
                    mark = i
                    num_bytes += grown
                    if num_bytes > size_max:
                        size_max = num_bytes
                if window_close:
                    c_new[row] = new
                    c_old[row] = old
                    c_ts[row] = ts
                    c_hdr[row] = hdr
                    if grown:
                        c_size[row] = size
                    dirty[row] = 1
                else:  # _BT, _KB, _NEW, _OLD, _PRIOR, _TS, _HDR, _SIZE, _SEQ, _BASE
                    bucket[inner] = puts[inner] = (
                        entry[0],
                        entry[1],
                        new,
                        old,
                        prior,
                        ts,
                        hdr,
                        size,
                        entry[8],
                        base,
                    )
            # emit every entry whose buffer time has passed, then enforce the capacity
            if due or (bounded and (count > max_records or num_bytes > max_bytes)):
                size_sum += num_bytes * (i + 1 - mark)  # the samples up to this row's put
                count_sum += count * (i + 1 - mark)
                mark = i + 1
                limit = observed - duration
                for by_capacity in (False, True):
                    if by_capacity and self.shut_down and (count > max_records or num_bytes > max_bytes):
                        self._save(
                            observed,
                            count,
                            num_bytes,
                            seq,
                            samples + i + 1,
                            size_sum,
                            count_sum,
                            size_max,
                            count_max,
                        )
                        raise BufferFullError(
                            f"{self.name} buffer exceeded its max capacity. Currently [{count}/{max_records}] "
                            f"records and [{num_bytes}/{max_bytes}] bytes."
                        )
                    evicted = False
                    if by_capacity:  # emit early (until_time_limit: a strict buffer shut down above)
                        leaving, left_count, left_bytes = [], count, num_bytes
                        while heap and (left_count > max_records or left_bytes > max_bytes):
                            leaving.append(pop_head())
                            left_count -= 1
                            left_bytes -= leaving[-1][1][_SIZE]
                    else:
                        leaving = pop_due(limit) if heap and heap[0][0] <= limit else ()
                    for ekey, entry in leaving:
                        count -= 1
                        num_bytes -= entry[_SIZE]
                        evicted = True
                        if entry[_NEW] is not None or not window_close:  # final results drop tombstones
                            out_k.append(ekey)
                            out_v.append(entry[_NEW])
                            out_o.append(entry[_OLD])
                            out_t.append(entry[_TS])
                            if out_h is not None:
                                out_h.append(entry[_HDR])
                            src.append(i)
                    if evicted:
                        evict_at = heap[0][0] + duration if heap else _NEVER
                        due = observed >= evict_at  # False: every entry due by observed time went out
                        bucket_window = NO_WINDOW  # an eviction may have deleted the cached bucket
                        samples += 1
                        size_sum += num_bytes
                        count_sum += count
        samples += len(keys)  # one sample per put
        size_sum += num_bytes * (len(keys) - mark)
        count_sum += count * (len(keys) - mark)
        self._save(observed, count, num_bytes, seq, samples, size_sum, count_sum, size_max, count_max)
        if out_h is not None and all(h is None for h in out_h):
            out_h = None
        return Batch(out_k, out_v, out_o, out_t, out_h, src)

    def _save(
        self, observed, count, num_bytes, seq, samples, size_sum, count_sum, size_max, count_max
    ) -> None:
        self.observed, self.count, self.num_bytes, self.next_seq = observed, count, num_bytes, seq
        self.samples, self.size_sum, self.count_sum = samples, size_sum, count_sum
        self.size_max, self.count_max = size_max, count_max

    def get(self, key: Any) -> tuple[Any, int] | None:
        """A join reading the suppressed table sees the last emitted value while the key is buffered."""
        entry = self.buffer.entry(key)
        if entry is not None:
            prior = entry[_PRIOR]
            return None if prior is None else (prior, -1)
        return self.task_context.value_getter(self.parent_name)(key)

    def metrics(self) -> dict[str, float]:
        return {
            "suppression-buffer-size-current": self.num_bytes,
            "suppression-buffer-size-avg": self.size_sum / self.samples,
            "suppression-buffer-size-max": self.size_max,
            "suppression-buffer-count-current": self.count,
            "suppression-buffer-count-avg": self.count_sum / self.samples,
            "suppression-buffer-count-max": self.count_max,
        }

    def _scalars(self) -> tuple:
        return (
            self.observed,
            self.count,
            self.num_bytes,
            self.next_seq,
            self.samples,
            self.size_sum,
            self.count_sum,
            self.size_max,
            self.count_max,
        )

    def restore_state(self, state: Any) -> None:
        """A snapshot of an engine before 2026-11-25 (one pickled state per node; snapshots are parts since)."""
        self.buffer.restore_entries(state)
        self._save(*state["scalars"])

    # State parts: "" holds the scalars, the buffer's parts hold its entries.
    def export_parts(self, changed_only: bool) -> tuple[dict[str, Any], list[str]]:
        parts, names = self.buffer.export_parts(changed_only)
        parts[""] = self._scalars()
        return parts, ["", *names]

    def state_parts(self) -> dict[str, Any]:
        parts = self.buffer.state_parts()
        parts[""] = self._scalars()
        return parts

    def apply_parts(self, parts: dict[str, Any], removed: list[str]) -> None:
        if "" in parts:
            self._save(*parts.pop(""))
        self.buffer.apply_parts(parts, removed)
