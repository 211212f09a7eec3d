"""The suppress buffer's store: Kafka's InMemoryTimeOrderedKeyValueBuffer (docs/semantics.md section 5).

The store owns its operations: `put_batch` puts a batch of updates in record order and, after each put,
evicts what the buffer's bounds say must go (entries due by observed time, then the heads while over
capacity, or `BufferFullError`), returning the evicted entries as output columns. It keeps its own
accounting (entry count, bytes where a byte bound needs them, the metric samples) and exports its changes
through its StoreLog. The suppress node (nodes/suppress.py) only hands it batches.

Entries are indexed by window, then key (`until_time_limit`: one bucket, by key): windowed keys of one
window share a Window object upstream, so the bucket is found by identity without hashing. They leave in
(buffer time, key bytes) order; an update keeps its entry's place. `until_time_limit` keeps a heap of its
entries (each has its own buffer time, its first put's), each a tuple in a dict by key. `until_window_closes`
keeps a heap of its windows only: a window's entries share its end as buffer time and, the config being
strict, leave together when it closes, so they are sorted by key bytes once then, not pushed into a heap one
by one (and their key bytes are computed then, not kept). Its windows keep their entries in rows
(WindowRows, columns ENTRY_COLUMNS; COUNT_ENTRY_COLUMNS when a count feeds it), which an export saves
column-wise; fed by a declared aggregation, its values in StructColumns (`hold_structs`). Fed by a windowed
aggregation alone (the fused pairs of nodes/final_window_count.py, nodes/final_window_user_aggregate.py and
nodes/final_window_aggregate.py), an entry's new value is the aggregation's value for its key (the object
its row holds, or the declared aggregation's columns): the buffer saves neither it nor the sizes (all 0),
and a load takes the new values from the aggregation's store (`share_new_values`); where its window's rows
hold the aggregation's keys, row for row (the fused pass appends both stores' rows together), it saves no
keys either, and a load reads them there. A buffer whose suppress
forwards no old values (no child of its table reads them) keeps none in its saved form (`forget_olds`), and
one whose table no node reads through the suppress node's value getter keeps no prior values where they are
objects (`forget_priors`).

Sizes: an entry's byte size (8 + key bytes + serialized prior, old when it differs from the prior, and new
values + 20 + topic name + header bytes) is computed only by a buffer with a byte limit, the one bound that
needs it; the other buffers keep 0 as every entry's size and report no byte metrics.
"""

from __future__ import annotations

from bisect import bisect_left
from heapq import heapify, heappop, heappush
from itertools import accumulate, compress, repeat
from operator import is_, itemgetter, not_
from typing import Any

import numpy as np

from ..records import Window, Windowed
from ..serde import headers_size, key_bytes, value_size, window_start_bytes
from ..suppress import BufferFullError
from .base import StateRow
from .key_table import same_keys
from .store_log import StoreLog
from .window_rows import INT64, OBJECT, StructColumn, StructFields, WindowRows

# Entry fields, in a tuple per buffered key (replaced on update). The entry and its heap item hold only
# the inner key and plain values, no list and no Windowed key: tuples of untracked objects leave the cyclic
# GC's lists at its next young collection, so a large buffer adds nothing to every full collection.
# In until_window_closes entries _BT and _KB are None: the buffer time is the window's end, and the key bytes
# are computed when the window leaves (less to save and load per entry). _BASE is the part of _SIZE fixed
# while the key stays buffered: buffer time, key bytes and prior value (0, as _SIZE, without a byte limit).
_BT, _KB, _NEW, _OLD, _PRIOR, _TS, _HDR, _SIZE, _SEQ, _BASE = range(10)
NO_WINDOW = object()
_NEVER = float("inf")
_new_tuple = tuple.__new__

# The columns of an until_window_closes window's rows: the entry fields but _BT, _KB and _SEQ (its entries
# leave by window and key bytes, so they need no sequence number); base and prior value last, fixed while
# the key stays buffered. Entries never leave one by one (the buffer is strict), so no row is dead
# (WindowRows: the first column is an int64).
ENTRY_COLUMNS = (INT64, INT64, OBJECT, OBJECT, OBJECT, INT64, OBJECT)  # ts, size, new, old, hdr | base, prior
# A buffer fed by a count (`TimeOrderedKeyValueBuffer.hold_counts`): its new, old and prior values are ints,
# in int64 columns. Saving and loading them then copies arrays instead of pickling an object per value.
COUNT_ENTRY_COLUMNS = (INT64, INT64, INT64, INT64, OBJECT, INT64, INT64)


def struct_entry_columns(fields: StructFields) -> tuple:
    """The columns of a buffer fed by a declared aggregation (`TimeOrderedKeyValueBuffer.hold_structs`): its
    new, old and prior values are dicts of the declared fields, held in StructColumns (a numpy array per
    field): saving and loading them copies arrays, and a dict is made only for an entry that leaves."""
    return (INT64, INT64, fields, fields, OBJECT, INT64, fields)


# A batch at least this long goes into an unbounded until_window_closes buffer a segment at a time
# (`_put_windowed_at_once`); shorter ones row by row.
MIN_ROWS_AT_ONCE = 64
_first, _second = itemgetter(0), itemgetter(1)


# The size and new value's columns: left out of the saved form of a buffer whose new values are its store's
# (`TimeOrderedKeyValueBuffer.share_new_values`; it sizes no entry: every size is 0). Such a buffer's old
# values (a list column) are saved apart (`_saved_olds`): not those of new rows that are the entry's prior
# value (the same object: an entry put once), which a load takes from the prior column.
SIZE_COLUMN, NEW_COLUMN, OLD_COLUMN, HEADERS_COLUMN, PRIOR_COLUMN = 1, 2, 3, 4, 6


def entry_rows(columns: tuple[str, ...] = ENTRY_COLUMNS, unsaved: tuple[int, ...] = ()) -> WindowRows:
    """The rows of a new until_window_closes window; its headers are mostly None in every row (the fused
    pairs put none), which its saved form then writes as None (WindowRows' `sparse`)."""
    return WindowRows(columns, fixed=2, unsaved=unsaved, sparse=(HEADERS_COLUMN,))


class Evicted:
    """Output columns of the entries a batch evicted, in eviction order; `src[j]`: the input row whose put
    evicted entry j."""

    __slots__ = ("keys", "values", "olds", "timestamps", "headers", "src")

    def __init__(self, with_headers: bool) -> None:
        self.keys: list = []
        self.values: list = []
        self.olds: list = []
        self.timestamps: list = []
        self.headers: list | None = [] if with_headers else None
        self.src: list = []


class TimeOrderedKeyValueBuffer:
    """The buffer of one suppress: its entries, its bounds (`duration` D: an entry is due once observed
    time - D reaches its buffer time; `max_records`, `max_bytes`: None for no bound; `shut_down`: raise
    BufferFullError when over a bound, else emit the heads early) and its accounting."""

    def __init__(
        self,
        window_close: bool,
        duration: int = 0,
        max_records: int | None = None,
        max_bytes: int | None = None,
        shut_down: bool = True,
        name: str = "suppress",
    ) -> None:
        self.window_close = window_close
        self.duration = duration
        self.max_records = max_records
        self.max_bytes = max_bytes
        self.shut_down = shut_down
        self.name = name
        self.bounded = max_records is not None or max_bytes is not None
        # entry sizes are computed for the byte bound, or for a reader of the byte metrics (measure_bytes)
        self.track_bytes = max_bytes is not None
        # window -> its rows (until_window_closes), or None -> {inner key: entry tuple} (until_time_limit)
        self.buckets: dict[Any, Any] = {}
        # until_time_limit: (buffer time, key bytes, seq, inner key) per entry; until_window_closes:
        # (end, start) per window. Either way the head's buffer time is heap[0][0].
        self.heap: list[tuple] = []
        # what changed since the last state export, per window (None: the one bucket of until_time_limit):
        # {inner key: entry} put, inner keys removed
        self.log = StoreLog()
        self.entry_columns = ENTRY_COLUMNS  # the kinds of an until_window_closes window's columns
        # (window, its rows, row numbers or None for all) -> those rows' new values, when every entry's new
        # value is what the aggregation upstream holds for its key and window (`share_new_values`)
        self.new_values_of: Any = None
        # window -> the keys by row of the aggregation's window (None: it has none), where the buffer's rows
        # may be the aggregation's (`share_new_values`)
        self.keys_of: Any = None
        # False when nothing reads the entries' old values (`forget_olds`)
        self.keeps_olds = True
        # False when nothing reads the entries' prior values (`forget_priors`); `drops_priors`: the prior
        # column of an until_window_closes window then holds None (where it holds objects)
        self.keeps_priors = True
        self.drops_priors = False
        self.unsaved_columns: tuple[int, ...] = ()
        self.observed = -1  # the buffer's stream time: the highest timestamp put
        self.count = 0
        self.num_bytes = 0  # 0 unless track_bytes
        self.next_seq = 0
        # Metric samples are taken after every put and every eviction pass, plus one at init (as Kafka).
        self.samples = 1
        self.size_sum = self.count_sum = 0
        self.size_max = self.count_max = 0

    def hold_counts(self) -> None:
        """Keep the values in int64 columns (COUNT_ENTRY_COLUMNS): the buffer is fed by a windowed count that
        sends old values, so every new, old and prior value is an int (a key new to its window has the
        initializer's 0 as old value). Set before the buffer holds anything (set again, it changes nothing)."""
        if self.buckets and self.entry_columns is not COUNT_ENTRY_COLUMNS:
            raise RuntimeError("hold_counts() must be set before the buffer holds entries")
        self.entry_columns = COUNT_ENTRY_COLUMNS
        self._leave_unsaved()

    def hold_structs(self, fields: StructFields) -> None:
        """Keep the values in StructColumns (`struct_entry_columns`): the buffer is fed by a declared
        aggregation, so every new, old and prior value is a dict of `fields`. Set before the buffer holds
        anything (set again, it changes nothing)."""
        if self.buckets and self.entry_columns[NEW_COLUMN] != fields:
            raise RuntimeError("hold_structs() must be set before the buffer holds entries")
        self.entry_columns = struct_entry_columns(fields)
        self._leave_unsaved()

    def share_new_values(self, new_values_of: Any, keys_of: Any = None) -> None:
        """until_window_closes fed by a windowed aggregation alone (a fused pair, nodes/final_window_count.py):
        every entry's new value is the aggregation's value for its key and window, the object its store row
        holds (the aggregation forwards its row's value; a window leaves both stores at the same observed
        time). So the buffer's saved form leaves its new values out, and a load takes them from the
        aggregation's store, which the task loads first (its parent): `new_values_of(window, rows,
        row numbers or None for every row)` gives them. `keys_of(window)`: the keys by row of the
        aggregation's window (None when it has none), for a fused pair whose buffer windows hold the rows of
        the aggregation's, key for key: a saved window whose keys are those of the aggregation's rows, row
        for row, leaves them out too (`_keys_shared`). Set before the buffer holds anything (set again, it
        only changes where the values come from)."""
        if self.buckets and self.new_values_of is None:
            raise RuntimeError("share_new_values() must be set before the buffer holds entries")
        if self.track_bytes:
            raise RuntimeError("a buffer that sizes its entries saves them")
        self.new_values_of = new_values_of
        self.keys_of = keys_of
        self._leave_unsaved()

    def forget_olds(self) -> None:
        """Nothing reads the entries' old values (the suppress node forwards none: no child of its table
        asks for them; puts read an entry's prior value, not its old one): an until_window_closes buffer
        leaves them out of its saved form, and a load leaves None (0 in a count's) in their place. The old
        values the buffer holds are then whatever the puts gave (a fused pass gives None). Set before the
        buffer holds anything."""
        if self.buckets and self.keeps_olds:
            raise RuntimeError("forget_olds() must be set before the buffer holds entries")
        self.keeps_olds = False
        self._leave_unsaved()

    def forget_priors(self) -> None:
        """Nothing reads the entries' prior values (the value last emitted for a buffered key, which only
        the suppress node's value getter reads, and a byte-bounded buffer's sizes): an until_window_closes
        buffer whose prior values are objects keeps None instead, and saves none. Set before the buffer
        holds anything."""
        if self.buckets and self.keeps_priors:
            raise RuntimeError("forget_priors() must be set before the buffer holds entries")
        self.keeps_priors = False
        self._leave_unsaved()

    def _leave_unsaved(self) -> None:
        """The columns an until_window_closes window's saved form leaves out: the sizes and new values of a
        buffer that shares them (`share_new_values`), the old values of one that forgets them
        (`forget_olds`) or that shares its new values and holds its old values as objects (saved apart,
        `_saved_olds`)."""
        shared = self.new_values_of is not None
        objects = self.entry_columns[OLD_COLUMN] == OBJECT
        olds = not self.keeps_olds or (shared and objects)
        self.drops_priors = (
            not self.keeps_priors
            and not self.track_bytes
            and self.window_close
            and self.entry_columns[PRIOR_COLUMN] == OBJECT
        )
        self.unsaved_columns = (
            *((SIZE_COLUMN, NEW_COLUMN) if shared else ()),
            *((OLD_COLUMN,) if olds else ()),
            *((PRIOR_COLUMN,) if self.drops_priors else ()),
        )

    def open_window(self, window: Any) -> WindowRows:
        """An until_window_closes window's rows, new to the buffer, its end in the heap."""
        rows = self.buckets[window] = entry_rows(self.entry_columns, self.unsaved_columns)
        heappush(self.heap, (window[1], window[0]))
        return rows

    def window_rows(self, window: Any) -> WindowRows | None:
        """An until_window_closes window's rows, None when the buffer holds none of it."""
        return self.buckets.get(window)

    def windows(self) -> list[Any]:
        """The until_window_closes windows the buffer holds entries of."""
        return list(self.buckets)

    def put_window_rows(
        self, window: Any, rows: Any, columns: list, new_keys: Any, new_columns: list, pickled_keys: Any
    ) -> None:
        """until_window_closes, for a caller that worked out a batch's entries of one window at once (an
        unbounded buffer: no sizes, and no eviction due within the batch's puts): replace the rows `rows`
        by `columns`, append `new_keys` with `new_columns` (WindowRows.put_rows, WindowRows.extend), the
        window opened if need be and flagged changed. Accounting follows with `add_samples`."""
        entries = self.buckets.get(window)
        if entries is None:
            entries = self.open_window(window)
        self.log.touch(window)
        if len(rows):
            entries.put_rows(rows, columns)
        if len(new_keys):
            entries.extend(new_keys, new_columns, pickled_keys)

    # -- puts and evictions -------------------------------------------------------------------------------

    # The eviction rule: an entry is due once its buffer time + D <= observed time.
    def due_at(self, buffer_time: int) -> int:
        """The observed time at which an entry of `buffer_time` is due."""
        return buffer_time + self.duration

    def due_limit(self, observed: int) -> int:
        """The latest buffer time due at `observed` time."""
        return observed - self.duration

    def _head_due_at(self) -> int:
        """The observed time at which the buffer's head is due (never when empty)."""
        return self.due_at(self.heap[0][0]) if self.heap else _NEVER

    def _enforce_after_put(
        self, row, mark, observed, count, num_bytes, seq, count_sum, size_sum, count_max, size_max, out
    ) -> tuple[int, int, int, int, int]:
        """For a put loop: its accounting saved after the put of input row `row` (with the samples of the
        puts of rows mark..row), then `_enforce`. Returns what the loop goes on from: the count, the bytes,
        the sums and the observed time at which the new head is due."""
        puts = row + 1 - mark
        self.observed, self.count, self.num_bytes, self.next_seq = observed, count, num_bytes, seq
        self.count_sum, self.size_sum = count_sum + count * puts, size_sum + num_bytes * puts
        self.count_max, self.size_max = count_max, size_max
        self._enforce(row, out)
        return self.count, self.num_bytes, self.count_sum, self.size_sum, self._head_due_at()

    def put_batch(
        self, keys: list, values: list, olds: list | None, timestamps: list, headers: list | None, topic: Any
    ) -> Evicted:
        """Put each update in record order; after each put evict the entries due (buffer time <= observed
        time - D, in buffer order), then enforce the bounds. Returns the evicted entries (until_window_closes
        leaves tombstones out: final results drop them). Raises BufferFullError (its accounting saved)
        at the put that overfills a buffer that shuts down."""
        out = Evicted(headers is not None)
        # the record context's size: timestamp, offset, partition + topic name
        context_size = 20 + (len(topic) if topic else 0)
        if self.window_close:
            if not (self.bounded or self.track_bytes) and headers is None and len(keys) >= MIN_ROWS_AT_ONCE:
                self._put_windowed_at_once(keys, values, olds, timestamps, out)
            else:
                self._put_windowed(keys, values, olds, timestamps, headers, context_size, out)
        else:
            self._put_keyed(keys, values, olds, timestamps, headers, context_size, out)
        return out

    def _put_windowed(self, keys, values, olds, timestamps, headers, context_size, out) -> None:
        buckets, log_touch = self.buckets, self.log.touch
        track, bounded = self.track_bytes, self.bounded
        max_records = self.max_records if self.max_records is not None else _NEVER
        max_bytes = self.max_bytes if self.max_bytes is not None else _NEVER
        vsize = value_size
        drops_priors = self.drops_priors
        observed, due_at = self.observed, self.due_at
        evict_at = self._head_due_at()  # observed time at which the head goes out
        # observed >= evict_at can only become true when observed time advances or a new window lowers
        # evict_at: tested there, not per row
        due = observed >= evict_at
        count, num_bytes, seq = self.count, self.num_bytes, self.next_seq
        count_sum, size_sum, count_max, size_max = (
            self.count_sum,
            self.size_sum,
            self.count_max,
            self.size_max,
        )
        # Each put's sample adds the buffer's size and count to the sums. They change only on an insert, a
        # put that resizes an entry, or an eviction, so the samples of rows [mark, i) are added in one go
        # there (and at the end).
        mark = 0
        bucket_window: Any = NO_WINDOW
        index: dict = {}
        row_keys = np.empty(0, object)
        dirty = bytearray()
        c_ts = c_size = c_new = c_old = c_hdr = c_base = c_prior = dirty
        suffix_len = 0  # the length of the bucket window's start serialized: its windowed keys' suffix
        # per window put into by this batch, its rows' index and columns: hopping windows alternate by row
        held_windows: dict = {}
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
            window = key[1]
            if window is not bucket_window:
                held = held_windows.get(window)
                if held is None:
                    bucket = buckets.get(window)
                    if bucket is None:
                        bucket = self.open_window(window)
                        if due_at(window[1]) < evict_at:
                            evict_at = due_at(window[1])
                            if observed >= evict_at:
                                due = True
                    log_touch(window)
                    held = held_windows[window] = (
                        bucket.index,
                        bucket.key_column(len(keys) - i),  # room for a row per put left (WindowRows)
                        bucket.dirty,
                        *bucket.dense_columns(),
                        len(window_start_bytes(window[0])) if track else 0,
                    )
                bucket_window = window
                index, row_keys, dirty, c_ts, c_size, c_new, c_old, c_hdr, c_base, c_prior, suffix_len = held
            inner = key[0]
            row = index.get(inner)
            if row is None:
                count_sum += count * (i - mark)
                size_sum += num_bytes * (i - mark)
                mark = i
                if track:  # buffer time, key bytes and prior value (the first update's old value)
                    base = 16 if type(old) is int else 8 + vsize(old)
                    base += (
                        len(inner.encode()) if type(inner) is str else len(key_bytes(inner))
                    ) + suffix_len
                    size = base + vsize(new) + context_size + (headers_size(hdr) if hdr else 0)
                    num_bytes += size
                    if num_bytes > size_max:
                        size_max = num_bytes
                else:
                    base = size = 0
                index[inner] = row = len(dirty)  # a row (WindowRows.append, inlined: ENTRY_COLUMNS)
                row_keys[row] = inner
                c_ts.append(ts)
                c_size.append(size)
                c_base.append(base)
                c_new.append(new)
                c_old.append(old)
                c_prior.append(None if drops_priors else old)
                c_hdr.append(hdr)
                dirty.append(1)
                seq += 1
                count += 1
                if count > count_max:
                    count_max = count
            else:
                if track:
                    size = c_base[row] + vsize(new) + context_size + (headers_size(hdr) if hdr else 0)
                    if old != c_prior[row]:
                        size += vsize(old)
                    grown = size - c_size[row]
                    if grown:
                        count_sum += count * (i - mark)
                        size_sum += num_bytes * (i - mark)
                        mark = i
                        num_bytes += grown
                        c_size[row] = size
                        if num_bytes > size_max:
                            size_max = num_bytes
                c_new[row] = new
                c_old[row] = old
                c_ts[row] = ts
                c_hdr[row] = hdr
                dirty[row] = 1
            if due or (bounded and (count > max_records or num_bytes > max_bytes)):
                count, num_bytes, count_sum, size_sum, evict_at = self._enforce_after_put(
                    i, mark, observed, count, num_bytes, seq, count_sum, size_sum, count_max, size_max, out
                )
                mark = i + 1
                due = observed >= evict_at
                bucket_window = NO_WINDOW  # an eviction may have deleted a held window
                held_windows.clear()
        n = len(keys)
        self.observed, self.count, self.num_bytes, self.next_seq = observed, count, num_bytes, seq
        self.samples += n  # one sample per put
        self.count_sum = count_sum + count * (n - mark)
        self.size_sum = size_sum + num_bytes * (n - mark)
        self.count_max, self.size_max = count_max, size_max

    def _put_windowed_at_once(self, keys, values, olds, timestamps, out) -> None:
        """`_put_windowed` for an unbounded buffer (no sizes, no capacity) and a batch without headers, by
        segments: only the windows' closes evict, so the batch is cut after each row at which a window is
        due (observed time reaches its end + D, or a row puts into a window already due), and each
        segment's puts are applied per window at once (a key's last put gives its fields, its first its
        prior value and, for a key new to the window, its row), then what is due is evicted. The entry count
        after each put is the count before the segment plus the keys inserted up to that row."""
        n, due_at = len(keys), self.due_at
        windows = list(map(_second, keys))
        inners = list(map(_first, keys))
        if olds is None:
            olds = [None] * n
        observed = list(accumulate(timestamps, max, initial=self.observed))[1:]  # after each row's put
        closes = {window: due_at(window[1]) for window in dict.fromkeys(windows)}
        due_rows = {bisect_left(observed, due_at(end)) for end, _ in self.heap}
        due_rows.update(bisect_left(observed, close) for close in closes.values())
        due_rows.update(
            row
            for row, window, time in zip(range(n), windows, observed, strict=True)
            if closes[window] <= time
        )
        due_rows.discard(n)
        lo = 0
        for hi in [*sorted(due_rows), n]:
            if hi == n and lo == n:
                break
            last = min(hi, n - 1)
            self._put_segment(lo, last + 1, windows, inners, values, olds, timestamps)
            if observed[last] > self.observed:
                self.observed = observed[last]
            if hi < n:
                self.evict_due(self.due_limit(self.observed), hi, out)
            lo = last + 1

    def _put_segment(self, lo: int, hi: int, windows, inners, values, olds, timestamps) -> None:
        """The puts of rows lo..hi-1, none of which is followed by an eviction before row hi-1's."""
        rows_by_window: dict = {}
        for row in range(lo, hi):
            rows_by_window.setdefault(windows[row], []).append(row)
        count_start, inserted_at = self.count, []
        for window, rows in rows_by_window.items():
            bucket = self.buckets.get(window)
            if bucket is None:
                bucket = self.open_window(window)
            self.log.touch(window)
            keys = [inners[row] for row in rows]
            last_row = dict(zip(keys, rows, strict=True))  # each key's last put, keys in order of first put
            index = bucket.index
            held = list(map(index.get, last_row))
            new_keys = [key for key, row in zip(last_row, held, strict=True) if row is None]
            c_ts, c_size, c_new, c_old, c_hdr, c_base, c_prior = bucket.columns
            headers_held = c_hdr is not None  # else every row's headers are None (a sparse column)
            put_rows = list(last_row.values())
            if len(new_keys) < len(last_row):  # keys the window holds: their fields replaced
                kept = [(row, put) for row, put in zip(held, put_rows, strict=True) if row is not None]
                structs = type(c_new) is StructColumn
                if structs:  # the values of the rows at once, into their columns
                    at = np.array([row for row, _ in kept], np.int64)
                    c_new.assign(at, [values[put] for _, put in kept])
                    c_old.assign(at, [olds[put] for _, put in kept])
                for row, put in kept:
                    c_ts[row] = timestamps[put]
                    if not structs:
                        c_new[row] = values[put]
                        c_old[row] = olds[put]
                    if headers_held:
                        c_hdr[row] = None
                    bucket.dirty[row] = 1
            if new_keys:
                first_row = dict(zip(keys[::-1], rows[::-1], strict=True))  # each key's first put
                new_puts = [last_row[key] for key in new_keys]
                bucket.extend(
                    new_keys,
                    [
                        [timestamps[put] for put in new_puts],
                        [0] * len(new_keys),
                        [values[put] for put in new_puts],
                        [olds[put] for put in new_puts],
                        [None] * len(new_keys),
                        [0] * len(new_keys),
                        [None] * len(new_keys)
                        if self.drops_priors
                        else [olds[first_row[key]] for key in new_keys],
                    ],
                )
                inserted_at += [first_row[key] for key in new_keys]
        # samples: the entry count after each put
        # an insert at row r adds one to the count of rows r..hi-1
        count_sum = count_start * (hi - lo) + len(inserted_at) * hi - sum(inserted_at)
        self.count = count_start + len(inserted_at)
        self.next_seq += len(inserted_at)
        self.samples += hi - lo
        self.count_sum += count_sum
        if self.count > self.count_max:
            self.count_max = self.count

    def _put_keyed(self, keys, values, olds, timestamps, headers, context_size, out) -> None:
        bucket = self.buckets.get(None)
        if bucket is None:
            bucket = self.buckets[None] = {}
        puts, heap = self.log.puts(None), self.heap
        track, bounded = self.track_bytes, self.bounded
        max_records = self.max_records if self.max_records is not None else _NEVER
        max_bytes = self.max_bytes if self.max_bytes is not None else _NEVER
        vsize = value_size
        observed, due_at = self.observed, self.due_at
        evict_at = self._head_due_at()
        due = observed >= evict_at
        count, num_bytes, seq = self.count, self.num_bytes, self.next_seq
        count_sum, size_sum, count_max, size_max = (
            self.count_sum,
            self.size_sum,
            self.count_max,
            self.size_max,
        )
        mark = 0  # see _put_windowed
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
            entry = bucket.get(key)
            if entry is None:
                count_sum += count * (i - mark)
                size_sum += num_bytes * (i - mark)
                mark = i
                kb = key_bytes(key)  # the order among entries of one buffer time
                if track:
                    base = 8 + len(kb) + (8 if type(old) is int else vsize(old))
                    size = base + vsize(new) + context_size + (headers_size(hdr) if hdr else 0)
                    num_bytes += size
                    if num_bytes > size_max:
                        size_max = num_bytes
                else:
                    base = size = 0
                heappush(heap, (ts, kb, seq, key))
                if due_at(ts) < evict_at:
                    evict_at = due_at(ts)
                    if observed >= evict_at:
                        due = True
                bucket[key] = puts[key] = (ts, kb, new, old, old, ts, hdr, size, seq, base)
                seq += 1
                count += 1
                if count > count_max:
                    count_max = count
            else:  # entry fields by position (see _BT.._BASE): an update keeps its place and prior value
                size = 0
                if track:
                    size = entry[9] + vsize(new) + context_size + (headers_size(hdr) if hdr else 0)
                    if old != entry[4]:
                        size += vsize(old)
                    grown = size - entry[7]
                    if grown:
                        count_sum += count * (i - mark)
                        size_sum += num_bytes * (i - mark)
                        mark = i
                        num_bytes += grown
                        if num_bytes > size_max:
                            size_max = num_bytes
                bucket[key] = puts[key] = (
                    entry[0],
                    entry[1],
                    new,
                    old,
                    entry[4],
                    ts,
                    hdr,
                    size,
                    entry[8],
                    entry[9],
                )
            if due or (bounded and (count > max_records or num_bytes > max_bytes)):
                count, num_bytes, count_sum, size_sum, evict_at = self._enforce_after_put(
                    i, mark, observed, count, num_bytes, seq, count_sum, size_sum, count_max, size_max, out
                )
                mark = i + 1
                due = observed >= evict_at
                bucket = self.buckets.get(None)
                if bucket is None:  # the eviction emptied the buffer
                    bucket = self.buckets[None] = {}
                puts = self.log.puts(None)
        n = len(keys)
        self.observed, self.count, self.num_bytes, self.next_seq = observed, count, num_bytes, seq
        self.samples += n
        self.count_sum = count_sum + count * (n - mark)
        self.size_sum = size_sum + num_bytes * (n - mark)
        self.count_max, self.size_max = count_max, size_max
        if not bucket:
            del self.buckets[None]

    def _enforce(self, row: int, out: Evicted) -> None:
        """After the put of input row `row` (accounting saved up to it): evict the entries due, then enforce
        the bounds, each pass one metric sample when it evicts anything."""
        heap = self.heap
        self.evict_due(self.due_limit(self.observed), row, out)
        if not self._over():
            return
        if self.shut_down:
            self.samples += row + 1  # the puts so far (put_batch adds the batch's, this one raises)
            raise BufferFullError(
                f"{self.name} buffer exceeded its max capacity. Currently [{self.count}/{self.max_records}] "
                f"records and [{self.num_bytes}/{self.max_bytes}] bytes."
            )
        leaving, count, num_bytes = [], self.count, self.num_bytes
        while heap and (
            (self.max_records is not None and count > self.max_records)
            or (self.max_bytes is not None and num_bytes > self.max_bytes)
        ):
            leaving.append(self.pop_head())
            count -= 1
            num_bytes -= leaving[-1][1][_SIZE]
        self._emit(leaving, row, out)

    def _over(self) -> bool:
        return (self.max_records is not None and self.count > self.max_records) or (
            self.max_bytes is not None and self.num_bytes > self.max_bytes
        )

    def evict_due(self, limit: int, row: int, out: Evicted) -> int:
        """Evict the entries whose buffer time is at or before `limit`, in buffer order, into `out` as
        evicted at input row `row`; a metric sample when any left. Returns how many left."""
        heap = self.heap
        if not heap or heap[0][0] > limit:
            return 0
        if self.window_close:
            return self._evict_windows(limit, row, out)
        leaving = self.pop_due(limit)
        self._emit(leaving, row, out)
        return len(leaving)

    def _evict_windows(self, limit: int, row: int, out: Evicted) -> int:
        """until_window_closes: the windows ending at or before `limit` leave, by end, their entries in key
        bytes order (windows ending together interleave), appended to `out` a column at a time; their
        tombstones leave unseen (final results drop them). A metric sample when any entry left."""
        heap, left = self.heap, 0
        while heap and heap[0][0] <= limit:
            end = heap[0][0]
            leaving: list[tuple[Any, WindowRows]] = []
            while heap and heap[0][0] == end:
                window = _new_tuple(Window, (heappop(heap)[1], end))
                window_rows = self.buckets.pop(window, None)
                if window_rows:
                    self.log.drop(window)
                    leaving.append((window, window_rows))
            if not leaving:
                continue
            if len(leaving) == 1:
                window, window_rows = leaving[0]
                inners, columns = window_rows.keys.tolist(), window_rows.columns
                windows: Any = repeat(window)
                key_bytes_ = self._window_key_bytes(inners, window[0], end)
            else:
                inners, windows, key_bytes_ = [], [], []
                columns = [[] for _ in leaving[0][1].columns]
                for window, window_rows in leaving:
                    window_inners = window_rows.keys.tolist()
                    inners += window_inners
                    windows += [window] * len(window_inners)
                    key_bytes_ += self._window_key_bytes(window_inners, window[0], end)
                    for merged, column in zip(columns, window_rows.columns, strict=True):
                        merged += repeat(None, len(window_inners)) if column is None else column
            ts, size, new, old, hdr = columns[:5]
            order = sorted(range(len(inners)), key=key_bytes_.__getitem__)  # unique within an end
            left += len(order)
            self.count -= len(order)
            self.num_bytes -= sum(size)
            if type(new) is not StructColumn and None in new:  # tombstones (a struct is never one)
                order = [i for i in order if new[i] is not None]
            if type(windows) is list:
                windows = map(windows.__getitem__, order)
            out.keys += map(
                _new_tuple, repeat(Windowed), zip(map(inners.__getitem__, order), windows, strict=False)
            )
            if type(new) is StructColumn:  # the leaving entries' dicts, made now
                at = np.array(order, np.int64)
                out.values += new.dicts(at)
                # old values nothing reads (`forget_olds`) are not made: None, as a fused pass puts them
                out.olds += old.dicts(at) if self.keeps_olds else repeat(None, len(order))
            else:
                out.values += map(new.__getitem__, order)
                out.olds += map(old.__getitem__, order)
            out.timestamps += map(ts.__getitem__, order)
            if out.headers is not None:
                out.headers += repeat(None, len(order)) if hdr is None else map(hdr.__getitem__, order)
            out.src += repeat(row, len(order))
        if left:
            self.samples += 1
            self.count_sum += self.count
            self.size_sum += self.num_bytes
        return left

    def _emit(self, leaving: list, row: int, out: Evicted) -> None:
        if not leaving:
            return
        drop_tombstones = self.window_close  # final results drop them
        for key, entry in leaving:
            self.count -= 1
            self.num_bytes -= entry[_SIZE]
            if entry[_NEW] is None and drop_tombstones:
                continue
            out.keys.append(key)
            out.values.append(entry[_NEW])
            out.olds.append(entry[_OLD])
            out.timestamps.append(entry[_TS])
            if out.headers is not None:
                out.headers.append(entry[_HDR])
            out.src.append(row)
        self.samples += 1
        self.count_sum += self.count
        self.size_sum += self.num_bytes

    # A caller that puts a batch's entries of a window at once (put_window_rows; an unbounded buffer: no
    # bytes) then accounts for them: `count_inserted` as the entries come in (before each `evict_due`, the
    # ones inserted by the puts before it), and `add_put_samples` for the samples its puts took.

    def count_inserted(self, inserted: int) -> None:
        """`inserted` new entries put since the last accounting."""
        self.count += inserted
        self.next_seq += inserted

    def add_put_samples(self, observed: int, puts: int, count_sum: int, count_max: int) -> None:
        """The samples of `puts` puts (each the entry count after it: summed, and their maximum) and the
        observed time after them."""
        if self.track_bytes:
            raise RuntimeError("a buffer with a byte limit accounts for its puts itself (put_batch)")
        self.observed = max(self.observed, observed)
        self.samples += puts
        self.count_sum += count_sum
        self.count_max = max(self.count_max, count_max)

    # -- metrics and reading ------------------------------------------------------------------------------

    def metrics(self) -> dict[str, float]:
        metrics = {
            "suppression-buffer-count-current": self.count,
            "suppression-buffer-count-avg": self.count_sum / self.samples,
            "suppression-buffer-count-max": self.count_max,
        }
        if self.track_bytes:
            metrics["suppression-buffer-size-current"] = self.num_bytes
            metrics["suppression-buffer-size-avg"] = self.size_sum / self.samples
            metrics["suppression-buffer-size-max"] = self.size_max
        return metrics

    def scalars(self) -> tuple:
        """The accounting, as the node's own state part holds it."""
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

    def set_scalars(self, scalars: tuple) -> None:
        (
            self.observed,
            self.count,
            self.num_bytes,
            self.next_seq,
            self.samples,
            self.size_sum,
            self.count_sum,
            self.size_max,
            self.count_max,
        ) = scalars

    def state_size(self) -> tuple[int, int]:
        """`(entries, windows)` the buffer holds (until_time_limit: no windows)."""
        return self.count, 0 if not self.window_close else len(self.buckets)

    def state_rows(self):
        """Every buffered entry: its key (the inner key of a windowed one), window, new value and timestamp."""
        for window, bucket in self.buckets.items():
            if window is None:
                for key, entry in bucket.items():
                    yield StateRow("suppress_buffer", key, None, None, entry[_NEW], entry[_TS])
                continue
            ts, new = bucket.columns[0], bucket.columns[2]
            for key, row in bucket.live():
                yield StateRow("suppress_buffer", key, window[0], window[1], new[row], ts[row])

    def pop_head(self) -> tuple[Any, list]:
        """Remove the entry first in (buffer time, key bytes) order: `(key, entry)` (until_time_limit: an
        until_window_closes buffer is strict, so its entries only leave by `pop_due`)."""
        if self.window_close:
            raise RuntimeError("an until_window_closes buffer only emits windows that closed (pop_due)")
        inner = heappop(self.heap)[3]
        return inner, self._pop(None, inner)

    def pop_due(self, limit: int) -> list[tuple[Any, tuple]]:
        """until_time_limit: remove the entries whose buffer time is at or before `limit`, in (buffer time,
        key bytes) order: `[(key, entry)]` (until_window_closes windows leave by `_evict_windows`)."""
        heap, due = self.heap, []
        while heap and heap[0][0] <= limit:
            due.append(self.pop_head())
        return due

    def _pop(self, window: Any, inner: Any) -> tuple:
        bucket = self.buckets[window]
        entry = bucket.pop(inner)
        self.log.remove(window, inner)
        if not bucket:
            del self.buckets[window]
        return entry

    def prior(self, key: Any) -> tuple[Any] | None:
        """`(the value last emitted for key,)` while the key is buffered, None when it is not."""
        if self.drops_priors:
            raise RuntimeError("the buffer keeps no prior values: nothing was to read them (forget_priors)")
        entry = self.entry(key)
        return None if entry is None else (entry[_PRIOR],)

    def entry(self, key: Any) -> tuple | None:
        if not self.window_close:
            return self.buckets.get(None, {}).get(key)
        rows = self.buckets.get(key[1])
        row = None if rows is None else rows.index.get(key[0])
        if row is None:
            return None
        ts, size, new, old, hdr, base, prior = rows.fields(row)
        return (None, None, new, old, prior, ts, hdr, size, None, base)

    @staticmethod
    def saved_entries(inners: list, entries: list) -> dict[str, Any]:
        """until_time_limit entries as saved: their inner keys and the entry tuples themselves (plain values:
        pickled and loaded at C speed, and loaded as they are)."""
        return {"keys": inners, "entries": entries}

    def load_entries(self, saved: dict[str, Any]) -> None:
        """Put until_time_limit entries saved by key (`saved_entries`) into the buffer (then `rebuild_heap`)."""
        keys, entries = saved["keys"], saved["entries"]
        if keys:
            self.buckets.setdefault(None, {}).update(zip(keys, entries, strict=True))

    @staticmethod
    def _window_key_bytes(keys: list, start: int, end: int) -> list[bytes]:
        """serde.key_bytes of the windowed keys of one window, by their inner keys."""
        suffix = window_start_bytes(start)
        if set(map(type, keys)) <= {str}:  # a string-keyed job: C loops
            return list(map(bytes.__add__, map(str.encode, keys), repeat(suffix)))
        window = _new_tuple(Window, (start, end))
        return [
            inner.encode() + suffix
            if type(inner) is str
            else key_bytes(_new_tuple(Windowed, (inner, window)))
            for inner in keys
        ]

    def rebuild_heap(self) -> None:
        """The heap of every window (until_window_closes) or buffered entry (after loading): an entry's
        order is its own (bt, kb, seq)."""
        if self.window_close:
            self.heap = [(window[1], window[0]) for window in self.buckets]
            heapify(self.heap)
            return
        self.heap = [
            (entry[_BT], entry[_KB], entry[_SEQ], inner)
            for inner, entry in self.buckets.get(None, {}).items()
        ]
        heapify(self.heap)

    # Parts: the store log's (StoreLog) "<start>:<end>.<n>" per window for until_window_closes, "all.<n>"
    # for until_time_limit, each `saved_entries` and the inner keys removed.
    def export_parts(self, changed_only: bool) -> tuple[dict[str, Any], list[str]]:
        if self.window_close:  # saved as WindowRows saves them, with their window
            return self.log.export(
                self.buckets, changed_only, _part_name, self._save_rows, WindowRows.changes
            )
        return self.log.export(self.buckets, changed_only, _part_name, self._save)

    def state_parts(self) -> dict[str, Any]:
        """Every part as an export of all of them writes it, leaving the log and the rows' change flags
        alone (StoreLog.bases)."""
        if self.window_close:
            return self.log.bases(self.buckets, _part_name, self._rows_base)
        return self.log.bases(self.buckets, _part_name, lambda window: self._save(window, None))

    def _rows_base(self, window: Any) -> dict[str, Any]:
        rows = self.buckets[window]
        shared = self._keys_shared(window, rows, 0)
        return self._with_shared_keys(
            _with_window(self._saved_olds(rows, rows.base(not shared)), window), shared
        )

    def _save(self, window: Any, put: dict | None) -> dict[str, Any]:
        entries = self.buckets[window] if put is None else put  # put: the entries still buffered
        return self.saved_entries(list(entries), list(entries.values()))

    def _save_rows(self, window: Any, put: dict | None) -> dict[str, Any]:
        rows = self.buckets[window]
        shared = self._keys_shared(window, rows, 0 if put is None else rows.saved)
        saved = rows.save(changed_only=put is not None, with_keys=not shared)
        return self._with_shared_keys(_with_window(self._saved_olds(rows, saved), window), shared)

    def _keys_shared(self, window: Any, rows: WindowRows, first: int) -> int | None:
        """How many keys a save of the rows `first`.. leaves out, None when it saves them: those rows' keys
        are the aggregation's window's in the same rows (`share_new_values`), which a load reads there.
        The keys compare by identity before content (`same_keys`): a pointer per row while both hold the
        same keys."""
        if self.keys_of is None:
            return None
        aggregated, end = self.keys_of(window), len(rows)
        if aggregated is None or len(aggregated) < end:
            return None
        return end - first if same_keys(aggregated[first:end], rows.keys[first:]) else None

    @staticmethod
    def _with_shared_keys(saved: dict[str, Any], shared: int | None) -> dict[str, Any]:
        if shared is not None:
            saved["shared_keys"] = shared
        return saved

    def _load_shared_keys(self, window: Any, saved: dict[str, Any], name: str) -> dict[str, Any]:
        """A saved window whose keys are the aggregation's (`_keys_shared`) with its keys, read from the
        aggregation's window, which the task loaded first."""
        shared = saved.get("shared_keys")
        if shared is None:
            return saved
        first = saved.get("from", 0)
        aggregated = None if self.keys_of is None else self.keys_of(window)
        if type(shared) is not int or aggregated is None or not 0 <= shared <= len(aggregated) - first:
            raise ValueError(f"state part {name!r}: keys of the aggregation's rows that it does not hold")
        return {**saved, "keys": aggregated[first : first + shared]}

    def _saved_olds(self, rows: WindowRows, saved: dict[str, Any]) -> dict[str, Any]:
        """`saved` (a window's saved rows) with its rows' old values when its rows leave them out: those of
        the rows it held before (a delta's rows put, but its new ones) in row order, then of its new rows
        (every row of a base) those that are not their prior value (`olds`), and per new row 1 where the
        old value is the prior one (`old_is_prior`, bytes). An entry's old value is its prior one while it
        was put once: a row put again since an earlier export has another."""
        if OLD_COLUMN not in rows.unsaved or not self.keeps_olds:
            return saved
        old, prior = rows.columns[OLD_COLUMN], rows.columns[PRIOR_COLUMN]
        first = saved.get("from", 0)
        held: Any = ()
        if "rows" in saved:
            at = np.frombuffer(saved["rows"], np.int64)
            held = _items(old, at[: len(at) - (len(old) - first)].tolist())
        new_olds = old[first:]
        is_prior = bytes(map(is_, new_olds, prior[first:]))
        saved["old_is_prior"] = is_prior
        saved["olds"] = (*held, *compress(new_olds, map(not_, is_prior)))
        return saved

    def _load_olds(self, rows: WindowRows, saved: dict[str, Any], name: str) -> None:
        """The old values of the rows a part saved (`_saved_olds`), after the part's load."""
        is_prior, olds = saved["old_is_prior"], saved["olds"]
        first = len(rows) - len(is_prior)  # the part's new rows: the window's last ones
        at = np.frombuffer(saved["rows"], np.int64) if "rows" in saved else None
        kept = 0 if at is None else len(at) - len(is_prior)
        if first != saved.get("from", 0) or kept < 0 or len(olds) != kept + is_prior.count(0):
            raise ValueError(f"state part {name!r}: old values that do not match its rows")
        explicit = iter(olds[kept:])
        new_olds = [
            p if flag else next(explicit)
            for flag, p in zip(is_prior, rows.columns[PRIOR_COLUMN][first:], strict=True)
        ]
        rows.fill(OLD_COLUMN, at, new_olds if at is None else [*olds[:kept], *new_olds])

    def apply_parts(self, parts: dict[str, Any], removed: list[str]) -> None:
        """Catch up with the parts written and removed since this buffer's last export, or load an empty
        buffer from every part (StoreLog.catch_up), and keep the heap. until_window_closes: the heap of
        windows is rebuilt (a few items). until_time_limit: items are pushed for the entries new since (a
        new key, or a key buffered again), and the entries gone since were heap heads when they went, so
        their items are popped from the head. The heap is rebuilt instead when that is cheaper (as many
        entries new as there were items: a load) or when pushes and pops do not account for every item (an
        out-of-order entry went in before the ones that left)."""
        dropped, steps = self.log.catch_up(parts, removed, _window_of_name)
        if self.window_close:
            self._apply_window_steps(dropped, steps)
            return
        before = {window: self.buckets.pop(window) for window in dropped if window in self.buckets}
        fresh: dict[tuple, None] = {}  # (window, inner key) of the entries whose heap item is new
        for window, saved, _ in steps:  # compared with the buffer before
            bucket = self.buckets.get(window) or before.get(window) or {}
            keys = saved["keys"]
            if not bucket:
                fresh.update(dict.fromkeys(zip(repeat(window), keys)))
                continue
            for inner, new_entry in zip(keys, saved["entries"], strict=True):
                entry = bucket.get(inner)
                if entry is None or entry[_SEQ] != new_entry[_SEQ]:
                    fresh[window, inner] = None
        for window, saved, gone in steps:
            self.load_entries(saved)
            bucket = self.buckets.get(window)
            if bucket is not None:
                for inner in gone:  # a key put and removed between two exports was never saved
                    bucket.pop(inner, None)
        for window in [w for w, bucket in self.buckets.items() if not bucket]:
            del self.buckets[window]
        heap, buckets = self.heap, self.buckets
        if len(fresh) >= len(heap):
            self.rebuild_heap()
            return
        for window, inner in fresh:
            entry = buckets.get(window, {}).get(inner)
            if entry is not None:
                heappush(heap, (entry[_BT], entry[_KB], entry[_SEQ], inner))
        while heap and self._stale(heap[0]):
            heappop(heap)
        if len(heap) != sum(map(len, buckets.values())):
            self.rebuild_heap()

    def _apply_window_steps(self, dropped: list, steps: list[tuple[Any, Any, list]]) -> None:
        """until_window_closes: the windows' parts over their rows, the new values their store's (for a buffer
        that shares them: of every row a base loaded, of the rows the deltas put), then the heap of windows
        rebuilt."""
        buckets = self.buckets
        for window in dropped:
            buckets.pop(window, None)
        to_fill: dict[Any, list | None] = {}  # window -> the row numbers of its deltas, None: every row
        for window, saved, _ in steps:
            rows = buckets.get(window)
            if rows is None:
                rows = buckets[window] = entry_rows(self.entry_columns, self.unsaved_columns)
            saved = self._load_shared_keys(window, saved, _part_name(window))
            rows.load(saved, _part_name(window), owned=True)  # unpickled for this catch-up
            if OLD_COLUMN in rows.unsaved and self.keeps_olds:
                self._load_olds(rows, saved, _part_name(window))
            if "rows" not in saved:
                to_fill[window] = None
            elif to_fill.get(window, ()) is not None:
                to_fill.setdefault(window, []).append(np.frombuffer(saved["rows"], np.int64))
        for window in [w for w, rows in buckets.items() if not rows]:
            del buckets[window]
        if self.new_values_of is not None:
            for window, positions in to_fill.items():
                rows = buckets.get(window)
                if rows is not None:
                    at = None if positions is None else np.unique(np.concatenate(positions))
                    rows.fill(NEW_COLUMN, at, self.new_values_of(window, rows, at))
        self.rebuild_heap()

    def _stale(self, item: tuple) -> bool:
        """Whether an until_time_limit heap item no longer stands for a buffered entry (gone, or buffered
        again since)."""
        entry = self.buckets.get(None, {}).get(item[3])
        return entry is None or entry[_SEQ] != item[2]


def _items(column: list, at: list[int]) -> list:
    """column[at], in one C loop."""
    if len(at) > 1:
        return list(itemgetter(*at)(column))
    return [column[row] for row in at]


def _window_of_name(name: str) -> Any:
    if name == "all":
        return None
    start, end = name.split(":")
    return _new_tuple(Window, (int(start), int(end)))


def _with_window(saved: dict[str, Any], window: Any) -> dict[str, Any]:
    """A window's saved rows (a fresh dict from WindowRows), with the window as a plain tuple."""
    saved["window"] = (window[0], window[1])
    return saved


def _part_name(window: Any) -> str:
    return "all" if window is None else f"{window[0]}:{window[1]}"
