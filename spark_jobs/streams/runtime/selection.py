"""Kafka's record selection over the records of several input topics at hand (docs/semantics.md section 1):
the next record is the head with the lowest timestamp, ties to the topic declared first. A task processes
consecutive records of one topic as one batch, so the selection is given as runs: which topic's records go
next, from where to where. `StreamTask.process_topics` and the Spark runtime's `select_records`
(spark/task_runner.py, which adds waiting for topics with files not read yet) both take it from here.

The runs come from one stable sort rather than a merge head by head. Replace each record's timestamp by the
highest timestamp of its topic so far (a running maximum): the selection then takes the same records in
the same order, and as those keys rise within each topic, the order is that of a stable sort by
(running maximum, topic declared), each topic's records in offset order. Why the running maximum changes
no choice: a topic's record whose timestamp is below its running maximum follows, in that topic, the record
that set the maximum, and that record was taken as the lowest head, (max, topic) below every other head;
the records after it up to this one are all at or below it, so each was taken in turn with the other heads
unchanged, and this one is lower than them too. So only the topic taken last can have a head below its
running maximum, it is taken under both keys, and every other head is its own running maximum.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def record_runs(timestamps: Sequence[Sequence[int]]) -> list[tuple[int, int, int]]:
    """The runs `(topic, start, end)` in which the selection takes the records of topics whose
    timestamps are given (each in offset order; topics by index, in the order they were declared): records
    `start` to `end` (exclusive) of `topic` go next, one run after the other until every record is taken."""
    counts = [len(column) for column in timestamps]
    live = [topic for topic, count in enumerate(counts) if count]
    if len(live) <= 1:
        return [(topic, 0, counts[topic]) for topic in live]
    keys = np.empty(sum(counts), np.int64)
    firsts = []  # where each topic's records start in `keys`
    at = 0
    for column, count in zip(timestamps, counts, strict=True):
        firsts.append(at)
        try:
            keys[at : at + count] = column
        except OverflowError:
            raise ValueError("timestamps must fit in int64") from None
        np.maximum.accumulate(keys[at : at + count], out=keys[at : at + count])
        at += count
    # topics in declared order in `keys`, each rising: a stable sort keeps ties to the topic declared first
    # and each topic's offset order (a merge of sorted runs, which the sort finds)
    order = np.argsort(keys, kind="stable")
    topic_of = np.repeat(np.arange(len(counts)), counts)[order]
    starts = np.flatnonzero(topic_of[1:] != topic_of[:-1]) + 1
    run_starts = np.concatenate(([0], starts))
    run_ends = np.concatenate((starts, [len(order)]))
    run_topics = topic_of[run_starts]
    offsets = order[run_starts] - np.asarray(firsts, np.int64)[run_topics]
    return list(
        zip(
            run_topics.tolist(),
            offsets.tolist(),
            (offsets + (run_ends - run_starts)).tolist(),
            strict=True,
        )
    )
