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
written.

A result of None is a tombstone: the node's store deletes the row and the key's next record in the
window starts from the initializer again, in a new row. The fold stops there and the batch is run by the
nodes themselves, their aggregation replaying the fold's results (the functions are not called twice):
rows that die and come back are the node's business.
"""

from __future__ import annotations

from collections import Counter
from itertools import repeat
from typing import Any

import numpy as np

from .aggregations import Aggregation, TimeWindowAggregateNode
from .base import Batch
from .final_window_count import FinalWindowCount, _Groups, _Pairs, _put, final_suppress
from .suppress import SuppressNode

_NO_ROW = object()  # a group's value while its key has no live row in the count's window


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

    def process_columns(self, keys, values, olds, timestamps, headers) -> Batch | None:
        self._keys, self._values = keys, values
        try:
            return super().process_columns(keys, values, olds, timestamps, headers)
        except _Tombstone as tombstone:
            return self._replayed(tombstone, keys, values, olds, timestamps, headers)
        finally:
            self._keys = self._values = []

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
    ) -> tuple[list, list, list]:
        """Each group's fold over its pairs: the initializer for each group whose key has no row (new to the
        window), then the aggregator once per pair, each key's calls in the node's order of its pairs;
        across groups the initializer's calls come first. The pairs are folded in the order that scatters
        the loop's reads over fewer objects (`_fold_order`). Only each group's first old value (where the
        buffer keeps priors, else None), last old value and last result are kept: the aggregates between
        are freed as the fold goes, as the node's loop frees them. A None result (a tombstone) ends the fold: the batch is replayed through the node
        (`_Tombstone`)."""
        initializer, aggregator = self.count.aggregation.initializer, self.count.aggregation.aggregator
        order = self._fold_order(group, pairs, places)
        folded_groups = group if order is None else group[order]
        rec = (pairs.rec if order is None else pairs.rec[order]).tolist()
        # per group its aggregate so far, in `old0` itself: a copy would take each old value once more, and
        # drop it once more after the fold (a cache miss apiece, the old values scattered over the heap)
        current = old0
        new_groups = np.flatnonzero(places.row < 0)  # no row: the initializer's value, in group order
        initial = [initializer() for _ in range(len(new_groups))]
        _put(current, new_groups, initial)
        # the first old values: a copy for the buffer's priors where it keeps them (None else); a replay
        # finds them in the store, or in `initial` (`_first_olds`)
        first_old = None if self.suppress.buffer.drops_priors else current.copy()
        last_old: list = [None] * len(old0)
        # each record's key and value fetched in C as the loop reaches it, not gathered before: a pass of
        # its own would touch each of them once more (a cache miss apiece where the fold goes by key)
        keys, values = map(self._keys.__getitem__, rec), map(self._values.__getitem__, rec)
        folding = zip(folded_groups.tolist(), keys, values, strict=True)
        for g, key, value in folding:
            last_old[g] = agg = current[g]
            current[g] = agg = aggregator(key, value, agg)
            if agg is None:
                rest = list(folding)
                done = folded_groups[: len(rec) - len(rest)].tolist()
                first = self._first_olds(set(done), pairs, places, new_groups, initial)
                raise _Tombstone(self._replay_steps(group, done, current, first, last_old, rest))
        if not self.suppress.buffer.keeps_olds:  # not read: the last old values are freed with the batch
            last_old = [None] * len(old0)
        return current, last_old, first_old

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
        rank = np.empty(len(rows), np.int64)  # per group: its place by window, then row
        rank[np.lexsort((place, places.window))] = np.arange(len(rows))
        key = pairs.key[pairs.rec]  # per pair: its key's number
        key_rank = np.full(int(key.max()) + 1, len(rows), np.int64)
        np.minimum.at(key_rank, key, rank[group])  # per key: its first group's place
        return np.argsort(key_rank[key], kind="stable")

    def _first_olds(
        self, groups: set[int], pairs: _Pairs, places: _Groups, new_groups: np.ndarray, initial: list
    ) -> dict:
        """Per group of `groups` its value before the batch: the initializer's where it had no row
        (`initial`, one per group of `new_groups`), else its row's in the count's store (nothing of the
        batch is put yet)."""
        store = self.count.store
        initial = dict(zip(new_groups.tolist(), initial, strict=True))
        first = {}
        for g in groups:
            row = int(places.row[g])
            if row < 0:
                first[g] = initial[g]
            else:
                first[g] = store.rows(int(pairs.start[places.first[g]])).columns[0][row]
        return first

    def _replay_steps(
        self, group: np.ndarray, folded: list[int], current: list, first_old: dict, last_old: list, rest: list
    ) -> list[tuple]:
        """(old, new) per pair, in the node's order (`group`: per pair its group), for the node to replay
        after a fold's pair gave None: the pairs folded (`folded`: their groups, in the fold's order, the
        last one the None) by their groups' first and last values (`_run`), the `rest` (group, key, value)
        folded pair by pair, in the fold's order, the initializer again after each None."""
        initializer, aggregator = self.count.aggregation.initializer, self.count.aggregation.aggregator
        runs = {g: _run(first_old[g], last_old[g], current[g], n) for g, n in Counter(folded).items()}
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
