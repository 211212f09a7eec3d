"""Which state parts hold a store's entries, so that an export writes what changed and no more.

A store's entries are grouped (by window; one group for a store without windows). Each group is saved as
a *base* part, `<group>.0`, with every entry of the group when it was written, then *delta* parts
`<group>.1`, `<group>.2`, ... with the entries put and the keys removed since the previous export. An import
applies the base, then the deltas in order. When the deltas written since the base outgrow the group
(DELTA_RATIO times its entries) or there are too many of them, the next export writes a new base and drops
the deltas: an export writes 1 + 1/DELTA_RATIO entries per entry change on average, and an import reads at
most 1 + DELTA_RATIO times the group's entries. A group gone from the store (a closed window) loses all its
parts.

The store records what a batch changes: `puts(group)` is a dict (of the store's choosing) of the entries put,
`remove(group, key)` records a key removed (and drops it from the puts), `drop(group)` a group that left
whole. A store that records its puts only as it exports (KeyValueStore, nodes/kv_store.py), after every
removal, may keep them in a list (`StoreLog(list)`): a key is then put once per export. A store that flags its changed entries itself (WindowRows, nodes/window_rows.py) only marks the
group with `touch(group)` and gives `export` a count of its changes. The export asks the store for the saved form of a group's entries (`Save`). A part is
`(saved entries, removed keys)`; the saved entries hold their keys first, or under "keys", or (WindowRows)
the rows changed under "rows".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

MAX_DELTAS = 32  # deltas a group may have before a new base (bounds its part count)
# Entries the deltas since a group's base may hold, per entry of the group: a micro-batch writes in
# proportion to its changes, an import (after a crash or on a new worker: rare) pays the deltas.
DELTA_RATIO = 2

# (group, what `puts` holds for it, or None) -> the saved form of those entries (of every entry of the group, in
# store order, for None)
Save = Callable[[Any, Any], Any]


class StoreLog:
    """What one store changed since its last export, per group, and which parts hold each group."""

    def __init__(self, puts: type[dict] = dict) -> None:
        self.new_puts = puts
        self.put: dict[Any, dict] = {}  # group -> {key: entry} put since the last export
        self.removed: dict[Any, set] = {}  # group -> keys removed since then
        # group -> [deltas after its base, entries in them]; the groups the parts of the last export hold
        self.saved: dict[Any, list[int]] = {}

    def puts(self, group: Any) -> dict:
        """Where a batch records the entries it puts into `group`; creating a group marks it too."""
        keys = self.put.get(group)
        if keys is None:
            keys = self.put[group] = self.new_puts()
        return keys

    def touch(self, group: Any) -> None:
        """Mark `group` changed, for a store that counts its own changes (`export`'s `changes`)."""
        if group not in self.put:
            self.put[group] = self.new_puts()

    def remove(self, group: Any, key: Any) -> None:
        """Record that `key` left `group`: what was put of it since the last export goes too."""
        put = self.put.get(group)
        if put:
            if type(put) is list:
                raise AssertionError("a store recording its puts in a list removed a key it had put")
            put.pop(key, None)
        removed = self.removed.get(group)
        if removed is None:
            removed = self.removed[group] = set()
        removed.add(key)

    def drop(self, group: Any) -> None:
        """Record that `group` left with all its entries: its parts go, and should it come back, it starts
        from a new base (its saved parts would still hold the entries that left)."""
        self.put.pop(group, None)
        self.removed.pop(group, None)
        self.saved.pop(group, None)

    def export(
        self,
        groups: Mapping[Any, Any],
        changed_only: bool,
        name: Callable[[Any], str],
        save: Save,
        changes: Callable[[Any], int] | None = None,
    ) -> tuple[dict[str, tuple], list[str]]:
        """Parts new or changed (all of them unless `changed_only`) and the names of every current part.
        `groups`: the store's entries, {group: {key: entry}} (or a sized object per group, with `changes`
        counting its changes since the last export, for a store that tracks them itself)."""
        parts: dict[str, tuple] = {}
        saved = self.saved
        if not changed_only:
            saved.clear()
        for group in [g for g in saved if g not in groups]:
            del saved[group]
        for group in groups if not changed_only else self.put.keys() | self.removed.keys():
            entries = groups.get(group)
            if entries is None:
                continue  # created and gone within the batch, or gone since
            log = saved.get(group)
            put = self.put.get(group, ())
            removed = self.removed.get(group)
            gone = [key for key in removed if key not in entries] if removed else []
            count = len(put) + len(gone) if changes is None else changes(entries)
            if log is None or log[1] + count > DELTA_RATIO * len(entries) or log[0] >= MAX_DELTAS:
                parts[f"{name(group)}.0"] = (save(group, None), [])
                saved[group] = [0, 0]
            elif count:
                log[0] += 1
                log[1] += count
                parts[f"{name(group)}.{log[0]}"] = (save(group, put), gone)
        self.put, self.removed = {}, {}
        return parts, [f"{name(g)}.{i}" for g, (deltas, _) in saved.items() for i in range(deltas + 1)]

    @staticmethod
    def bases(
        groups: Mapping[Any, Any], name: Callable[[Any], str], base: Callable[[Any], Any]
    ) -> dict[str, tuple]:
        """A base part per group, as an export of every part writes them, leaving the log alone (a snapshot
        of the task, which must not change what its next export writes). `base(group)`: the saved form of
        every entry of the group, as `save(group, None)` gives it, without side effects."""
        return {f"{name(group)}.0": (base(group), []) for group in groups}

    def catch_up(
        self, parts: Mapping[str, tuple], removed: list[str], group_of: Callable[[str], Any]
    ) -> tuple[list[Any], list[tuple[Any, Any, list]]]:
        """Bring a store from its last export (or a new, empty store) to a later point of the same export
        history, which another copy of the store went through: `parts` were written since, `removed` (part
        names) went since; for an import, every current part and nothing removed. Returns the groups whose
        entries go (gone, or replaced by a new base), then the parts to apply in order, base first, as
        `(group, saved entries, removed keys)`. `group_of` turns a part's group name back into its group. Raises
        ValueError where the parts do not continue this store's history."""
        self.put, self.removed = {}, {}
        by_group = _by_group(parts)
        dropped: list[Any] = []
        gone_by_group: dict[str, set[int]] = {}
        for part_name in removed:
            group_name, index = part_name.rsplit(".", 1)
            gone_by_group.setdefault(group_name, set()).add(int(index))
        for group_name, gone in gone_by_group.items():
            if 0 in by_group.get(group_name, ()):
                continue  # a new base: the deltas before it went
            group = group_of(group_name)
            log = self.saved.get(group)
            if log is None and group_name not in by_group:
                continue  # based and gone after this store's last export: nothing of it is here
            # every part this store applied went, and with them any delta written and gone since
            if log is None or not gone.issuperset(range(log[0] + 1)):
                raise ValueError(f"state parts of {group_name!r}: {sorted(gone)} removed without a new base")
            del self.saved[group]
            dropped.append(group)
        steps: list[tuple[Any, Any, list]] = []
        for group_name, pieces in by_group.items():
            group = group_of(group_name)
            log = self.saved.get(group)
            indexes = sorted(pieces)
            if indexes[0] == 0:
                _check_indexes(group_name, indexes, 0)
                if log is not None:
                    dropped.append(group)
                log = self.saved[group] = [0, 0]
            elif log is None:
                raise ValueError(f"state parts of {group_name!r}: deltas {indexes} of a group never based")
            else:
                _check_indexes(group_name, indexes, log[0] + 1)
            log[0] = indexes[-1]
            log[1] += sum(_changes(pieces[i]) for i in indexes if i)
            steps += [(group, *pieces[index]) for index in indexes]
        return dropped, steps


def _by_group(parts: Mapping[str, tuple]) -> dict[str, dict[int, tuple]]:
    by_group: dict[str, dict[int, tuple]] = {}
    for part_name, part in parts.items():
        group_name, index = part_name.rsplit(".", 1)
        by_group.setdefault(group_name, {})[int(index)] = part
    return by_group


def _check_indexes(group_name: str, indexes: list[int], first: int) -> None:
    if indexes != list(range(first, first + len(indexes))):
        raise ValueError(f"state parts of {group_name!r}: expected parts {first}.. in a row, got {indexes}")


def _changes(part: tuple) -> int:
    saved, gone = part
    # rows changed (WindowRows), else entries put (their keys as a list or a text)
    if isinstance(saved, dict):
        if "key_count" in saved:
            return saved["key_count"] + len(gone)
        return len(saved["rows"] if "rows" in saved else saved["keys"]) + len(gone)
    return len(saved[0]) + len(gone)
