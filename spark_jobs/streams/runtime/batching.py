"""Column sets of sink output and their depth-first merge (used by StreamTask's batch path).

A column set is `[topics, keys, values, timestamps, headers]` (parallel lists; headers None when no row
has any). A result is `(columns, src)` where `src[j]` is the index of the row, in the input of the node
that produced the result, that row j descends from (None: row j descends from input row j).

Record by record, a node's children see each of its output rows in turn (depth first). So the sinks' rows
of a fan-out interleave by parent row, earlier children first: `merge` restores that order by splicing
the children's columns by their parent rows (`src`), earlier children first at the same parent.
"""

from __future__ import annotations

Columns = list  # [topics, keys, values, timestamps, headers-or-None]
Result = tuple  # (Columns | None, src | None)
EMPTY: Result = (None, None)


def rows_to_columns(rows: list[tuple]) -> Columns | None:
    if not rows:
        return None
    topics, keys, values, timestamps, headers = map(list, zip(*rows, strict=False))
    return [topics, keys, values, timestamps, None if all(h is None for h in headers) else headers]


def sink_columns(topic: str, keys: list, values: list, timestamps: list, headers: list | None) -> Columns:
    return [[topic] * len(keys), keys, values, timestamps, headers]


def compose(src: list | None, child_src: list | None) -> list | None:
    """Map rows through a node: rows -> node outputs (child_src) -> node inputs (src)."""
    if src is None:
        return child_src
    if child_src is None:
        return src
    return [src[i] for i in child_src]


def concat(segments: list[Columns]) -> Columns:
    if len(segments) == 1:
        return segments[0]
    out: Columns = [[], [], [], [], None]
    with_headers = any(seg[4] is not None for seg in segments)
    if with_headers:
        out[4] = []
    for seg in segments:
        for c in range(4):
            out[c] += seg[c]
        if with_headers:
            out[4] += seg[4] if seg[4] is not None else [None] * len(seg[0])
    return out


def merge(results: list[Result], need_src: bool) -> Result:
    """Merge children's results (in child order) into one depth-first ordered result."""
    merged_cols, merged_src = results[0]
    last = len(results) - 1
    for i in range(1, len(results)):
        cols, src = results[i]
        # the next merge needs the src of this one, whatever the caller needs
        merged_cols, merged_src = _merge_two(merged_cols, merged_src, cols, src, need_src or i < last)
    return merged_cols, merged_src


def _merge_two(a: Columns, a_src: list | None, b: Columns, b_src: list | None, need_src: bool) -> Result:
    """Rows of `b` go after the rows of `a` that descend from the same or an earlier parent row: a stable
    sort of both by parent row (each in parent order already, so the sort merges two runs), then each
    column picked in that order."""
    na, nb = len(a[0]), len(b[0])
    parents = (list(range(na)) if a_src is None else a_src) + (list(range(nb)) if b_src is None else b_src)
    order = sorted(range(na + nb), key=parents.__getitem__)

    def pick(x: list, y: list) -> list:
        both = x + y
        return [both[k] for k in order]

    a_headers, b_headers = a[4], b[4]
    if a_headers is None and b_headers is None:
        headers = None
    else:
        headers = pick(
            [None] * na if a_headers is None else a_headers, [None] * nb if b_headers is None else b_headers
        )
    cols = [pick(a[c], b[c]) for c in range(4)] + [headers]
    return cols, [parents[k] for k in order] if need_src else None
