"""A windowed declared aggregation whose only child is a final suppress, both run in one pass per batch.

`windowed_by(TimeWindows).agg(...).suppress(until_window_closes(unbounded()))` emits one value per key and
window, when the window closes. Run node by node, the aggregation builds a value dict for every (record,
window) pair and the buffer puts each one; here the aggregation folds the batch as it does alone
(`DeclaredWindowAggregateNode.fold_batch`, its values as numpy columns), and the buffer keeps them as
columns too (TimeOrderedKeyValueBuffer.hold_structs): per (window, key) of the batch its value after the
batch, the old value of its last update and, for an entry new to the buffer, its prior value (the old value
of its first update). A value becomes a dict only when its entry leaves the buffer.

The result is the nodes' own, to the metric, for the reasons that nodes/final_window_count.py gives: the
buffer's observed time after each pair is the running maximum of the aggregation's output timestamps,
which is never ahead of the aggregation's observed time, and the buffer's window closes at the time the
aggregation's does (its time limit is the windows' grace), so a window leaves the buffer at the first pair
whose observed time reaches its close and no pair of it follows (the aggregation drops those). The entries
are then put with their batch-final values first, and the windows leave in order, each at its pair
(`evict_at_passes`). A batch with headers, a short one, a buffer that sizes its entries or holds an empty
window, or a buffer ahead of the aggregation (not fed by it alone) runs node by node.
"""

from __future__ import annotations

from operator import itemgetter
from typing import Any

import numpy as np

from .base import Batch
from .declared_aggregations import DeclaredWindowAggregateNode, FoldedBatch, stable_order
from .final_window_count import evict_at_passes
from .key_table import same_keys
from .suppress import SuppressNode
from .window_rows import StructValues, dumps_plain

# Below this many rows the nodes' loops are cheaper than numpy's fixed cost per call.
MIN_ROWS = 256


def final_window_aggregate(node: Any) -> FinalWindowAggregate | None:
    """The fused pair when `node` is a windowed declared aggregation whose only child is an unbounded final
    suppress that closes its windows when the aggregation does."""
    if not isinstance(node, DeclaredWindowAggregateNode) or not node.send_old_values:
        return None
    if len(node.children) != 1:
        return None
    suppress = node.children[0]
    if not isinstance(suppress, SuppressNode) or not suppress.window_close:
        return None
    buffer = suppress.buffer
    if buffer.bounded or buffer.track_bytes or buffer.duration != node.windows.grace:
        return None
    return FinalWindowAggregate(node, suppress)


class FinalWindowAggregate:
    """Runs `aggregate` and its child `suppress` over a batch as the two nodes would, in one pass."""

    def __init__(self, aggregate: DeclaredWindowAggregateNode, suppress: SuppressNode) -> None:
        self.aggregate = aggregate
        self.suppress = suppress
        # The buffer's values are this aggregation's: columns of its fields, which the fused pass fills with
        # numpy. Only for the fused pair: run node by node, the suppress loop reads and writes each value.
        suppress.buffer.hold_structs(aggregate.layout.fields)
        suppress.buffer.share_new_values(self.stored_values, self.stored_keys)

    def stored_keys(self, window: Any) -> np.ndarray | None:
        """The keys by row of the aggregation's window `window[0]`, None when it holds none: the buffer's
        where its rows are the aggregation's (TimeOrderedKeyValueBuffer.share_new_values)."""
        rows = self.aggregate.groups.get(window[0])
        return None if rows is None else rows.keys[: rows.size]

    def stored_values(self, window: Any, entries: Any, at: np.ndarray | None) -> StructValues:
        """The buffer's new values of its window `window`'s rows `entries` at row numbers `at` (None: every
        row), as the buffer loads them (TimeOrderedKeyValueBuffer.share_new_values): each key's value in the
        aggregation's store, the last one it forwarded. A window whose rows are the store's reads them by
        row number, the others by key."""
        rows = self.aggregate.groups.get(window[0])
        if rows is None:
            raise ValueError(
                f"state of {self.suppress.name}: window {window[0]}:{window[1]} buffered, "
                f"not in the store of {self.aggregate.name}"
            )
        if same_keys(rows.keys[: rows.size], entries.keys):
            found = np.arange(len(entries)) if at is None else at
        else:
            keys = entries.keys if at is None else entries.keys[at]
            found = np.array([-1 if row is None else row for row in map(rows.row_of, keys)], np.int64)
            if len(found) and found.min() < 0:
                raise ValueError(
                    f"state of {self.suppress.name}: an entry of window {window[0]}:{window[1]} without a "
                    f"value in the store of {self.aggregate.name}"
                )
        return self.aggregate.layout.struct_values(
            {name: column[found] for name, column in rows.columns.items()}
        )

    def process_columns(self, keys, values, olds, timestamps, headers) -> Batch | None:
        """The suppress node's output; its `src` points at this batch's rows (the aggregation's input)."""
        if not self._fusable(keys, headers):
            return self._node_by_node(keys, values, olds, timestamps, headers)
        aggregate = self.aggregate
        aligned = self._aligned_windows()
        folded = aggregate.fold_batch(keys, values, timestamps, headers, running=False)
        if folded is None:
            aggregate.drop_closed_windows()
            return None
        out = self._put_and_evict(folded, aligned)
        aggregate.drop_closed_windows()
        olds = out.olds if self.suppress.send_old_values else None  # as the suppress node forwards them
        return Batch(out.keys, out.values, olds, out.timestamps, None, out.src)

    def _fusable(self, keys: list, headers: Any) -> bool:
        buffer = self.suppress.buffer
        if headers is not None or len(keys) < MIN_ROWS or buffer.track_bytes:
            return False
        if buffer.observed > self.aggregate.observed:
            return False
        # an empty window leaves without a metric sample: node by node
        return all(len(buffer.window_rows(window)) for window in buffer.windows())

    def _aligned_windows(self) -> set[int]:
        """The starts of the buffer's windows whose rows are the aggregation's, as a batch begins: the same
        keys in the same rows, compared whole while the two stores hold as many (by identity first, in numpy,
        without reading the keys: a pointer per row, `same_keys`). The batch appends the same new keys to
        both."""
        aligned = set()
        groups = self.aggregate.groups
        buffer = self.suppress.buffer
        for window in buffer.windows():
            rows = groups.get(window[0])
            entries = buffer.window_rows(window)
            if rows is not None and entries is not None and same_keys(rows.keys[: rows.size], entries.keys):
                aligned.add(window[0])
        return aligned

    def _node_by_node(self, keys, values, olds, timestamps, headers) -> Batch | None:
        out = self.aggregate.process_columns(keys, values, olds, timestamps, headers)
        if out is None or not out.keys:
            return None
        final = self.suppress.process_columns(out.keys, out.values, out.olds, out.timestamps, out.headers)
        # the aggregation's own src is None when nothing reads it (then the suppress's is not read either)
        return final._replace(src=None if out.src is None else [out.src[i] for i in final.src])

    def _put_and_evict(self, folded: FoldedBatch, aligned: set[int]) -> Any:
        """The buffer's entries of the batch's (window, key) groups put at once, then its windows leave.
        `aligned`: the windows whose rows were the aggregation's as the batch began (`_aligned_windows`)."""
        aggregate, buffer = self.aggregate, self.suppress.buffer
        layout, groups, folds = aggregate.layout, folded.groups, folded.folds
        m = len(folded.rec)
        ends = np.cumsum(groups.sizes)
        first_pair = groups.order[ends - groups.sizes]  # per group: its first pair
        n_groups = len(ends)

        # per group: its entry's row in the buffer's window (-1: new), the windows' new keys in the order
        # of their first put
        buffer_row = np.full(n_groups, -1, np.int64)
        # per window: its first pair, its groups (a range: a store's groups lie together, in row order), the
        # aggregation's rows where they are the buffer's, and the buffer's rows before the batch
        windows = []
        expected = max((len(buffer.window_rows(w)) for w in buffer.windows()), default=0)
        for start, store, (lo, hi) in zip(
            folded.window_starts, groups.stores, groups.store_groups, strict=True
        ):
            window = aggregate.window_objects[start]
            in_window = slice(lo, hi)
            entries = buffer.window_rows(window)
            held = 0 if entries is None else len(entries)
            same = entries is None or start in aligned or _same_rows(store.keys[: store.size], entries.keys)
            if entries is not None:
                if same:
                    rows = groups.rows[in_window]
                    buffer_row[in_window] = np.where(rows < held, rows, -1)
                else:
                    buffer_row[in_window] = entries.rows_of(groups.keys_of(in_window), expected)
            windows.append(
                (int(first_pair[in_window].min()), window, in_window, store if same else None, held)
            )
        new_entry = buffer_row < 0

        # the entries' values as columns (the buffer holds them so: `hold_structs`): per group its value
        # after the batch; the old value of its last put, its value before its last pair (a held entry's
        # value before the batch, for a group of one pair); and, for an entry new to the buffer, its prior
        # value, the old value of its first put: the group's value before the batch
        finals, befores = folds.at_last_pairs()
        ts = finals["ts"]
        new_values = layout.struct_values(finals)
        old_values = layout.struct_values(befores)
        prior_values = layout.struct_values(folds.prior)
        windows.sort(key=itemgetter(0))  # opened in order of first put
        for _, window, in_window, same_rows, held in windows:
            lo, hi = in_window.start, in_window.stop
            # the entries new to the buffer in the order of their first puts: their row order where their
            # rows are new to the aggregation's store too (appended in that order, group_pairs), else sorted
            new = lo + np.flatnonzero(new_entry[in_window])
            if len(new) > 1 and (np.diff(first_pair[new]) < 0).any():
                new = new[stable_order(first_pair[new], m)]  # by radix: pair numbers are below m
            # where the two stores hold the same rows, the window's new keys are the rows the aggregation
            # appended in this batch, in order: read there (a view, not a gather of the key objects, which
            # takes a reference to each, a cache miss apiece among many keys) and pickled once, for both
            # stores' saves
            pickled_keys = None
            if len(new) and same_rows is not None and same_rows.size == held + len(new):
                new_keys = same_rows.keys[held : same_rows.size]
                pickled_keys = dumps_plain(new_keys.tolist())
                same_rows.add_key_chunk(held, held + len(new_keys), pickled_keys)
            else:
                new_keys = groups.keys_of(new)
            # the held entries in group order: the aggregation's row order, which is the buffer's row order
            # where the two rows came from the same puts, so the buffer's columns are written in order
            put = lo + np.flatnonzero(~new_entry[in_window])
            buffer.put_window_rows(
                window,
                buffer_row[put],
                [ts[put], np.zeros(len(put), np.int64), new_values[put], old_values[put], None],  # no headers
                new_keys,
                [
                    ts[new],
                    np.zeros(len(new), np.int64),
                    new_values[new],
                    old_values[new],
                    None,
                    np.zeros(len(new), np.int64),
                    prior_values[new],
                ],
                pickled_keys,
            )

        # the buffer's observed time after each pair's put: the running maximum of the output timestamps,
        # each the maximum of its group's timestamp before the batch and of its pairs' up to it: the running
        # maximum of the pairs' timestamps and of each group's prior one from its first pair on
        output_ts_bound = folded.pair_ts.copy()
        output_ts_bound[first_pair] = np.maximum(output_ts_bound[first_pair], folds.prior["ts"])
        buffer_observed = np.maximum(np.maximum.accumulate(output_ts_bound), buffer.observed)
        delta_count = np.zeros(m, np.int64)
        delta_count[first_pair[new_entry]] = 1
        leaves = np.searchsorted(
            buffer_observed, [buffer.due_at(window[1]) for window in buffer.windows()], "left"
        )
        passes = sorted(set(leaves[leaves < m].tolist()))
        src = folded.rec if folded.kept is None else folded.kept[folded.rec]
        return evict_at_passes(buffer, passes, delta_count, buffer_observed, src)


def _same_rows(aggregated: np.ndarray, buffered: np.ndarray) -> bool:
    """Whether the buffer's window holds its keys in the rows where the aggregation's window has them (the
    aggregation's keys new in this batch come after): so it is when both were built by the same puts, the
    buffer's rows then need no look-up. The keys compare by identity before content (`same_keys`): a
    pointer per row while the two hold the same key objects."""
    held = len(buffered)
    return len(aggregated) >= held and same_keys(aggregated[:held], buffered)
