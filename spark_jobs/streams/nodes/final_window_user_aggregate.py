"""A windowed `aggregate` or `reduce` whose only child is a final suppress, both run in one pass per batch.

The plan is FinalWindowCount's (nodes/final_window_count.py): a batch's (record, window) pairs in numpy
arrays, grouped by window and key, each group's store row and buffer entry looked up and written once,
the buffer's windows leaving at the pairs where the nodes' would, and only the entries that leave built as
output. What differs is the values: the user's functions make them, as often as the node calls them and
in its order within each (window, key) group: the initializer once for each group whose key has no row
(before the aggregator's calls, where the node calls it at the group's first pair), then the aggregator
in one Python loop over the pairs, each key's in the node's order. The loop goes by record, the records'
values read in the order they lie in memory, unless the groups outnumber the records (a large window whose
keys have a record or two each): then key by key in the order of their rows, which is the order the
aggregates were made in by the previous fold, and mostly the order they lie in (`_fold_order`). Each
group's aggregate so far is kept by group number instead of in the store, and only what the
store and the buffer keep of a batch (a group's last value, the old values of its first and last puts) is
written. A fold that goes key by key pickles the aggregates it finished every few hundred pairs, while they
are in the CPU's caches, and the store's next export saves those chunks as they are: pickled by the
export, each would be read from memory again (the aggregates a batch of such a window makes outgrow the
caches). It does so once the store has been exported (TimeWindowStore.exported): a run that never exports
would only drop them. For the same reason the fold takes the old aggregates out of the stores' rows itself,
a few rows at a time (each read and released while in the caches), and writes the ones it finished into the
held rows as it goes (with each pickle, where it pickles): the puts that follow leave them there.

A result of None is a tombstone: the node's store deletes the row and the key's next record in the
window starts from the initializer again, in a new row. The fold stops there and the batch is run by the
nodes themselves, their aggregation replaying the fold's results (the functions are not called twice):
rows that die and come back are the node's business.
"""

from __future__ import annotations

from array import array
from collections import Counter, deque
from itertools import islice, repeat
from typing import Any

import numpy as np

from .aggregations import Aggregation, TimeWindowAggregateNode
from .base import Batch
from .final_window_count import (
    FinalWindowCount,
    _by_row,
    _Groups,
    _Pairs,
    _put,
    _put_gathered,
    _same_rows,
    final_suppress,
)
from .suppress import SuppressNode
from .time_ordered_buffer import NEW_COLUMN
from .window_rows import IN_PLACE, INT64, WindowRows, dumps_plain

_NO_ROW = object()  # a group's value while its key has no live row in the count's window
# Pairs a fold that goes key by key folds between two pickles of the aggregates it finished (to the next
# key): few enough that those aggregates, and what the fold read to make them, are still in the CPU's
# caches (a pickle reads each one again); enough that a pickler's set-up per chunk and window stays small.
PICKLED_PAIRS = 512
# Rows whose old values the fold takes from the stores at a time (`_take_olds`): few enough that the values
# read are still in the CPU's caches when the stores release them.
TAKEN_ROWS = 1024


def final_window_user_aggregate(node: Any) -> FinalWindowUserAggregate | None:
    """The fused pair when `node` is a windowed aggregate or reduce whose only child is an unbounded final
    suppress."""
    suppress = final_suppress(node)
    if suppress is None or node.aggregation.kind == "count":
        return None
    return FinalWindowUserAggregate(node, suppress)


class _Tombstone(Exception):
    """A fold's result was None: the batch goes node by node, replaying the fold's results by pair."""

    def __init__(self, steps: list[tuple]) -> None:
        super().__init__("a tombstone in the batch")
        self.steps = steps


class _Replay:
    """The aggregation of a node replaying a fold's (old, new) pair by pair in the node's order: the old
    value is what the initializer gives (called when the row is missing), the new one the aggregator's."""

    def __init__(self, steps: list[tuple]) -> None:
        self.steps = steps
        self.at = 0

    def initializer(self) -> Any:
        return self.steps[self.at][0]

    def aggregator(self, key: Any, value: Any, agg: Any) -> Any:
        new = self.steps[self.at][1]
        self.at += 1
        return new


def _finish_chunk(
    finished: list[tuple], current: list, pickled: dict[int, list] | None, released: dict[int, tuple]
) -> dict[int, list] | None:
    """What a fold does with the aggregates of the groups a chunk finished (`_pickling_plan`), while they
    are in the CPU's caches: pickled, per window start added to `pickled` (None: not pickled, see
    `_pickled`), and the held groups' of a window whose stores released their old values (`released`,
    `_take_olds`) written into their rows (WindowRows.place, the count's and the buffer's): the puts that
    follow leave them in place (IN_PLACE)."""
    for start, rows, groups, held_rows, held_at in finished:
        if pickled is None and not held_rows:  # nothing to pickle (a store not exported) nor to place
            continue
        values = list(map(current.__getitem__, groups))
        if pickled is not None:
            pickled = _pickled(pickled, start, rows, values)
        if held_rows:
            count_rows, entries = released[start][:2]
            count_rows.place(0, held_rows, map(values.__getitem__, held_at))
            entries.place(NEW_COLUMN, held_rows, map(values.__getitem__, held_at))
    return pickled


def _pickled(pickled: dict[int, list], start: int, rows: array, values: list) -> dict[int, list] | None:
    """`pickled` with the values of the window `start`'s rows `rows` pickled, added to its chunks; None
    when one cannot be pickled as a plain column (`dumps_plain`: a cycle), which the export's pickle then
    meets."""
    try:
        data = dumps_plain(values)
    except Exception:  # noqa: BLE001 - any value the export pickles instead
        return None
    pickled.setdefault(start, []).append((rows, data))
    return pickled


def _run(first: Any, last_old: Any, last_new: Any, n: int) -> list[tuple]:
    """(old, new) of `n` puts of one row that the suppress buffer sees as the fold's: what it keeps of a
    key's puts in a batch is the first old value (the entry's prior value) and the last old and new values
    (nodes/time_ordered_buffer.py), and no window leaves between a group's puts (FinalWindowCount._passes).
    The aggregates between them are not kept by the fold (see `_results`): the puts between carry the last
    old value. A row's run ends at its last pair, or at a None result (then `last_new` is None)."""
    if n == 1:
        return [(first, last_new)]
    return [(first, last_old), *repeat((last_old, last_old), n - 2), (last_old, last_new)]


class FinalWindowUserAggregate(FinalWindowCount):
    """Runs a windowed `aggregate` (or `reduce`) and its child final suppress over a batch as the two nodes
    would, in one pass."""

    def __init__(self, aggregate: TimeWindowAggregateNode, suppress: SuppressNode) -> None:
        self.count = aggregate  # FinalWindowCount's name for the aggregation node
        self.suppress = suppress
        suppress.buffer.share_new_values(self.stored_values, self.stored_keys)
        self._keys: list = []
        self._values: list = []
        # window start -> the chunks of its groups' aggregates the fold pickled, for the count's store
        self._pickled: dict[int, list[tuple[array, bytes]]] = {}
        # the window starts whose held rows the fold gave their aggregates as it made them (`_finish_chunk`)
        self._placed: set[int] = set()

    def process_columns(self, keys, values, olds, timestamps, headers) -> Batch | None:
        self._keys, self._values = keys, values
        try:
            return super().process_columns(keys, values, olds, timestamps, headers)
        except _Tombstone as tombstone:
            return self._replayed(tombstone, keys, values, olds, timestamps, headers)
        finally:
            self._keys = self._values = []
            self._pickled = {}
            self._placed = set()

    def _pickled_values(self, start: int) -> list | None:
        return self._pickled.pop(start, None)

    def _held_values(self, plan: Any, start: int, groups: np.ndarray) -> Any:
        return IN_PLACE if start in self._placed else super()._held_values(plan, start, groups)

    def _replayed(self, tombstone: _Tombstone, keys, values, olds, timestamps, headers) -> Batch | None:
        node = self.count
        aggregation = node.aggregation
        replay = _Replay(tombstone.steps)
        node.aggregation = Aggregation(aggregation.kind, replay.initializer, replay.aggregator)
        try:
            out = self._node_by_node(keys, values, olds, timestamps, headers)
        finally:
            node.aggregation = aggregation
        if replay.at != len(replay.steps):
            raise RuntimeError(
                f"{node.name}: the node made {replay.at} of the batch's {len(replay.steps)} pairs"
            )
        return out

    def _no_values(self, n: int) -> list:
        return [_NO_ROW] * n

    def _results(
        self, old0: list, sizes: np.ndarray, group: np.ndarray, pairs: _Pairs, places: _Groups
    ) -> tuple[list, list | None, list | None]:
        """Each group's fold over its pairs: the initializer for each group whose key has no row (new to the
        window), then the aggregator once per pair, each key's calls in the node's order of its pairs;
        across groups the initializer's calls come first. The pairs are folded in the order that scatters
        the loop's reads over fewer objects (`_fold_order`). Only each group's first old value (where the
        buffer keeps priors, else None), last old value (where the buffer keeps old values) and last
        result are kept: the aggregates between are freed as the fold goes, as the node's loop frees them.
        Where the buffer keeps neither, nothing reads the old aggregates but the aggregator: the stores
        release them as the fold takes them (`_take_olds`), so each is freed as the fold replaces it, in
        the CPU's caches, not when the store's put replaces it. A None result (a tombstone) ends the fold:
        the rows released are given back and the batch is replayed through the node (`_Tombstone`).

        A fold that goes key by key pickles the aggregates every PICKLED_PAIRS pairs or so, at the end of a
        key (its groups' aggregates are final then), for the count's store to save as they are
        (`_pickled_values`), once the store is exported: an export that pickled them would read each one
        from memory (the aggregates a batch makes outgrow the caches). A fold that ends early (a tombstone,
        an error) keeps none. At the same points it writes those aggregates into the held rows it released
        (`_finish_chunk`), which the stores' puts then leave in place (`_held_values`): a gather and a put
        per store after the fold would read each one from memory."""
        initializer, aggregator = self.count.aggregation.initializer, self.count.aggregation.aggregator
        order = self._fold_order(group, pairs, places)
        folded_groups = group if order is None else group[order]
        rec = (pairs.rec if order is None else pairs.rec[order]).tolist()
        # per group its aggregate so far, in `old0` itself: a copy would take each old value once more, and
        # drop it once more after the fold (a cache miss apiece, the old values scattered over the heap)
        current = old0
        new_groups = np.flatnonzero(places.row < 0)  # no row: the initializer's value, in group order
        initial = [initializer() for _ in range(len(new_groups))]
        buffer = self.suppress.buffer
        # where the buffer keeps old values or priors, the old aggregates stay (the loop keeps the last old
        # values); else nothing reads them but the aggregator, and the stores release them
        olds_kept = buffer.keeps_olds or not buffer.drops_priors
        released = self._take_olds(current, pairs, places, release=not olds_kept)
        _put(current, new_groups, initial)
        first_old = None if buffer.drops_priors else current.copy()  # the priors' (a new entry's first)
        last_old: list | None = [None] * len(old0) if olds_kept else None
        # each record's key and value fetched in C as the loop reaches it, not gathered before: a pass of
        # its own would touch each of them once more (a cache miss apiece where the fold goes by key)
        keys, values = map(self._keys.__getitem__, rec), map(self._values.__getitem__, rec)
        folding = zip(folded_groups.tolist(), keys, values, strict=True)
        ends, finished = self._pickling_plan(order, pairs, places, released)
        # pickled only for a store that is exported (TimeWindowStore.exported): a run that never exports
        # would only drop the chunks
        pickled: dict[int, list] | None = {} if finished is not None and self.count.store.exported else None
        dead = None  # the group whose result was None, and its old value
        folded = 0
        try:
            for n, end in enumerate(ends):
                chunk, folded = islice(folding, end - folded), end
                if last_old is None:
                    for g, key, value in chunk:
                        agg = current[g]
                        current[g] = new = aggregator(key, value, agg)
                        if new is None:
                            dead = g, agg
                            break
                else:
                    for g, key, value in chunk:
                        last_old[g] = agg = current[g]
                        current[g] = new = aggregator(key, value, agg)
                        if new is None:
                            dead = g, agg
                            break
                if dead is not None:
                    break
                if finished is not None:
                    pickled = _finish_chunk(finished[n], current, pickled, released)
        except BaseException:
            self._give_back(released, current)
            raise
        if dead is not None:
            rest = list(folding)
            done = folded_groups[: len(rec) - len(rest)].tolist()
            current[dead[0]] = dead[1]  # the row's value until the node replays the batch
            self._give_back(released, current)
            if last_old is None:  # none kept: the puts between a group's first and last carry its last value
                last_old = {g: current[g] for g in done}
            current[dead[0]] = None
            first = dict(zip(new_groups.tolist(), initial, strict=True))
            raise _Tombstone(self._replay_steps(group, done, current, first, last_old, rest))
        self._pickled = pickled or {}
        self._placed = set(released) if finished is not None else set()
        return current, last_old if buffer.keeps_olds else None, first_old

    def _pickling_plan(
        self, order: np.ndarray | None, pairs: _Pairs, places: _Groups, released: dict[int, tuple]
    ) -> tuple[list[int], list[list[tuple]] | None]:
        """Where the fold stops to pickle what it finished (`_results`): the ends of its chunks of pairs
        (in the fold's order) and per chunk the groups it finished, as (window start, their rows in the
        count's window, the groups, and of those the held ones' rows and places among them where the
        window's stores released their old values (`released`), else empty lists), each window's in the
        fold's order (`_finish_chunk`). Only a fold that goes key by key (`order`) has chunks: one by
        record finishes its groups' aggregates at its end, out of the caches (`[m], None`)."""
        m = len(pairs.rec)
        if order is None:
            return [m], None
        key = pairs.key[pairs.rec[order]]  # per pair in the fold's order: its key's number
        key_starts = np.flatnonzero(key[1:] != key[:-1]) + 1
        after = np.searchsorted(key_starts, np.arange(PICKLED_PAIRS, m, PICKLED_PAIRS))
        ends = [*np.unique(key_starts[after[after < len(key_starts)]]).tolist(), m]
        # the groups in the fold's order (of their first pairs, which the fold's order keeps first), without
        # a sort: each group at its first pair's place in the fold
        position = np.empty(m, np.int64)
        position[order] = np.arange(m)
        at_place = np.full(m, -1, np.int64)
        at_place[position[places.first]] = np.arange(len(places.first))
        groups = at_place[at_place >= 0]
        place = position[places.first[groups]]
        rows = self._rows_put(pairs, places)[groups]
        window = places.window[groups]
        finished: list[list] = [[] for _ in ends]
        for w in range(int(window.max()) + 1 if len(window) else 0):  # windows: numbered in start order
            in_window = np.flatnonzero(window == w)
            if not len(in_window):
                continue
            start = int(pairs.start[places.first[groups[in_window[0]]]])
            cuts = np.searchsorted(place[in_window], ends).tolist()  # per chunk: the end of its groups
            window_groups, window_rows = groups[in_window].tolist(), array(INT64, rows[in_window].tobytes())
            if start in released:  # the held groups, by the same cuts: their rows, their places in the chunk
                held = np.flatnonzero(places.row[groups[in_window]] >= 0)
                held_cuts = np.searchsorted(held, cuts).tolist()
                chunk_first = np.array([0, *cuts[:-1]], np.int64)[np.searchsorted(cuts, held, "right")]
                held_rows, held_at = rows[in_window[held]].tolist(), (held - chunk_first).tolist()
            else:
                held_cuts = [0] * len(cuts)
                held_rows = held_at = []
            lo = held_lo = 0
            for n, (hi, held_hi) in enumerate(zip(cuts, held_cuts, strict=True)):
                if hi > lo:
                    finished[n].append(
                        (
                            start,
                            window_rows[lo:hi],
                            window_groups[lo:hi],
                            held_rows[held_lo:held_hi],
                            held_at[held_lo:held_hi],
                        )
                    )
                lo, held_lo = hi, held_hi
        return ends, finished

    def _rows_put(self, pairs: _Pairs, places: _Groups) -> np.ndarray:
        """Per group its row in the count's window once the batch is put: a held group's row, and for the
        others the rows appended to their window, in order of their first pairs (_Groups)."""
        rows = places.row.copy()
        new = np.flatnonzero(rows < 0)
        if not len(new):
            return rows
        new = new[np.lexsort((places.first[new], places.window[new]))]
        window = places.window[new]
        run = np.flatnonzero(np.concatenate(([True], window[1:] != window[:-1])))  # each window's first
        lengths = np.diff(np.append(run, len(new)))
        held = []
        for g in new[run].tolist():
            window_rows = self.count.store.rows(int(pairs.start[places.first[g]]))
            held.append(0 if window_rows is None else len(window_rows))
        rows[new] = np.arange(len(new)) - np.repeat(run, lengths) + np.repeat(held, lengths)
        return rows

    def _old_values(self, old0: list, groups: np.ndarray, rows: WindowRows, found: np.ndarray) -> None:
        """Left to the fold (`_take_olds`): read here, in the plan's order, each old value would be touched
        from memory once more, scattered, before the fold's release and read of it."""

    def _take_olds(self, current: list, pairs: _Pairs, places: _Groups, release: bool) -> dict[int, tuple]:
        """The held groups' old values into `current`, window by window in row order (the columns, and
        mostly the values, made in the previous fold's order, in memory order). With `release`, the stores
        release them as they are read (WindowRows.take, WindowRows.release: the count's rows, and the
        buffer's new values where its rows are the count's), a few rows at a time, each value touched by
        its read and its releases while in the CPU's caches; `current` holds them for the fold, which frees
        each as it replaces it. Returns by start of each window released (its count rows, its buffer rows,
        the rows, the groups), for `_give_back` and `_finish_chunk`. A window whose buffer rows are not the
        count's is only read (its buffer would keep the values)."""
        held = np.flatnonzero(places.row >= 0)
        released: dict[int, tuple] = {}
        if not len(held):
            return released
        size = self.count.windows.size
        window = places.window[held]
        for groups in np.split(held, np.flatnonzero(window[1:] != window[:-1]) + 1):
            start = int(pairs.start[places.first[groups[0]]])
            rows = self.count.store.rows(start)
            groups, found = _by_row(groups, places.row[groups])
            entries = self.suppress.buffer.window_rows((start, start + size)) if release else None
            if entries is None or not _same_rows(rows, entries):
                _put_gathered(current, groups, rows.columns[0], found)
                continue
            row_list, group_list = found.tolist(), groups.tolist()
            for lo in range(0, len(row_list), TAKEN_ROWS):
                part = row_list[lo : lo + TAKEN_ROWS]
                deque(
                    map(current.__setitem__, group_list[lo : lo + TAKEN_ROWS], rows.take(0, part)), maxlen=0
                )
                entries.release(NEW_COLUMN, part)
            released[start] = rows, entries, row_list, group_list
        return released

    @staticmethod
    def _give_back(released: dict[int, tuple], current: list) -> None:
        """The rows released by `_take_olds` hold their groups' values in `current` (a fold that did not
        end: before a replay, or on an error from the user's functions; the old values of the groups folded
        are gone then, so the rows hold the values so far, as the node's loop leaves the rows it got to)."""
        for rows, entries, row_list, groups in released.values():
            rows.give_back(0, row_list, map(current.__getitem__, groups))
            entries.give_back(NEW_COLUMN, row_list, map(current.__getitem__, groups))

    def _fold_order(self, group: np.ndarray, pairs: _Pairs, places: _Groups) -> np.ndarray | None:
        """The order of the pairs to fold in (None: as they come, by record), each key's pairs in their
        order either way. By record, the loop reads the records' values in the order they lie in memory and
        the groups' aggregates scattered; key by key, in the order of the keys' first rows in the store
        (by window, then row), it reads the aggregates in the order the store's rows were put (the order
        of the previous fold, in which they were made: mostly the order they lie in memory, which the
        batch's puts and the export then follow too) and the records' values scattered. So it goes by key
        where the groups outnumber the records (a large window, its keys a record or two each), else by
        record."""
        if len(places.row) <= len(self._keys):
            return None
        rows = places.row
        unheld = rows < 0  # appended after the held rows, in order of their first pairs
        place = np.where(unheld, places.first + (int(rows.max()) + 1), rows)
        # the sorts below are of distinct values (a window's places are distinct, and so are the pairs'
        # numbers): numpy's default sort (SIMD) then gives the one order, several times faster than a
        # stable sort or lexsort of the same values
        rank = np.empty(len(rows), np.int64)  # per group: its place by window, then row
        rank[np.argsort(places.window * (int(place.max()) + 1) + place)] = np.arange(len(rows))
        key = pairs.key[pairs.rec]  # per pair: its key's number
        key_rank = np.full(int(key.max()) + 1, len(rows), np.int64)
        np.minimum.at(key_rank, key, rank[group])  # per key: its first group's place
        return np.argsort(key_rank[key] * len(key) + np.arange(len(key)))  # by key rank, then pair

    def _replay_steps(
        self, group: np.ndarray, folded: list[int], current: list, first: dict, last_old: Any, rest: list
    ) -> list[tuple]:
        """(old, new) per pair, in the node's order (`group`: per pair its group), for the node to replay
        after a fold's pair gave None: the pairs folded (`folded`: their groups, in the fold's order, the
        last one the None) by their groups' first and last values (`_run`), the `rest` (group, key, value)
        folded pair by pair, in the fold's order, the initializer again after each None. The node reads a
        step's old value only where it calls the initializer (a key without a row): `first` holds the
        initializer's values by group, None stands for the others'. `last_old`: by group, the old value of
        its last put (where the buffer keeps none, the fold kept none either: the group's last value, which
        nothing reads but the row's next put)."""
        initializer, aggregator = self.count.aggregation.initializer, self.count.aggregation.aggregator
        runs = {g: _run(first.get(g), last_old[g], current[g], n) for g, n in Counter(folded).items()}
        current[folded[-1]] = _NO_ROW
        for g, key, value in rest:
            agg = current[g]
            if agg is _NO_ROW:
                agg = initializer()
            new = aggregator(key, value, agg)
            runs.setdefault(g, []).append((agg, new))
            current[g] = _NO_ROW if new is None else new
        steps = {g: iter(run) for g, run in runs.items()}
        return [next(steps[g]) for g in group.tolist()]
