"""A key -> entry store with batch operations, saved in hash groups through a StoreLog (nodes/store_log.py).

Table aggregations keep `(value, timestamp)` per key (`TimestampedKeyValueStore`; tables and non-windowed
aggregations keep theirs in numbered rows, nodes/kv_rows.py); the session, sliding-window and join window
stores keep a structure per key on top of the same store (nodes/window_stores.py). An export saves, per group of keys, the entries put since the last export (a
delta) or every entry of the group (a base), so that it writes in proportion to what changed.

Where the time goes at a few hundred thousand keys: a look-up in a dict that size is a few cache misses, so
the store does none per entry at an export. A put records the entry with its key (`_changed`, a dict filled
in the batch's order while the entries are in the CPU's caches); a key's group is `hash(key) % GROUPS`, and
a str caches its hash, so the export sorts the changed keys into groups in one C pass. The keys new since
the last export are the last ones of the store's dict (a dict keeps insertion order; updating a key does
not move it, and a key deleted and put again is inserted anew): the export finds them from the end,
without looking the others up.

A str hashes differently in another process (unless PYTHONHASHSEED is fixed, as Spark's Python workers
fix it): a store loaded from parts keeps the group each key was saved in where it differs from its own
(`_foreign`); the next time such a key is put, it moves to its own group (the delta of its old group
removes it). A catch-up removes a key from a group only while the key is in that group.

Saved form: `{"keys": [...], "columns": [...]}`, the entries of those keys by column as the store writes
them (`columns` / `loaded_entries`); a part is `(saved, keys removed)`.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator, Mapping
from itertools import islice, repeat
from operator import is_, itemgetter
from typing import Any

import numpy as np

from .store_log import StoreLog

GROUPS = 32  # hash groups of a store: an export writes a delta or a base per group changed


def int_column(values: list | tuple) -> Any:
    """Pack ints as a signed 64-bit array (compact and fast to pickle); other values stay a list (bools and
    other int subclasses too: an array would load them back as plain ints)."""
    if set(map(type, values)) <= {int}:
        try:
            return array("q", values)
        except OverflowError:
            pass
    return list(values)


def _pick(items: list, positions: list[int]) -> list:
    """`items` at `positions`, in one C loop."""
    if len(positions) == 1:
        return [items[positions[0]]]
    return list(itemgetter(*positions)(items)) if positions else []


class KeyValueStore:
    """key -> entry (any object; None is no entry). `prefix` names the store's parts: `<prefix><group>.<n>`.
    An entry mutated in place is to be marked with `touch(key)` (or put again) before the next export."""

    hash_shift = 0  # added to a key's hash for its group (tests: a process whose str hashes differ)

    def __init__(self, prefix: str = "kv") -> None:
        self.prefix = prefix
        self.entries: dict[Any, Any] = {}
        self._changed: dict[Any, Any] = {}  # key -> entry, put since the last export
        self._members: dict[int, dict[Any, None]] = {}  # group -> its saved keys (non-empty)
        self._foreign: dict[Any, int] = {}  # key -> its group, where that is not its hash's
        self._pending: dict[int, tuple[list, list]] = {}  # the export's groups: (keys, entries) put
        self._saved = 0  # keys the groups hold (every key but those new since the last export)
        self.log = StoreLog(list)  # the keys put per group, recorded at the export only (see StoreLog)

    # -- operations -----------------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.entries)

    def __contains__(self, key: Any) -> bool:
        return key in self.entries

    def get(self, key: Any) -> Any:
        return self.entries.get(key)

    def get_list(self, keys: list) -> list:
        """Per key (in order, repeats too) its entry or None."""
        return list(map(self.entries.get, keys))

    def put(self, key: Any, entry: Any) -> None:
        """Set `key`'s entry; None deletes it."""
        if entry is None:
            self.delete(key)
        else:
            self.entries[key] = entry
            self._changed[key] = entry

    def put_batch(self, items: Mapping[Any, Any] | Iterable[tuple[Any, Any]]) -> None:
        """Put `(key, entry)` pairs in order (a later pair of a key wins; None deletes)."""
        if not isinstance(items, Mapping):
            items = dict(items)  # the last pair of each key: the same end state as putting them in order
        deleted = [key for key, entry in items.items() if entry is None]
        if deleted:
            items = {key: entry for key, entry in items.items() if entry is not None}
            for key in deleted:
                self.delete(key)
        self.entries.update(items)
        self._changed.update(items)

    def touch(self, key: Any) -> None:
        """`key`'s entry changed in place."""
        self._changed[key] = self.entries[key]

    def delete(self, key: Any) -> Any:
        """Remove `key`'s entry; returns it (None when it had none)."""
        entry = self.entries.pop(key, None)
        if entry is None:
            return None
        self._changed.pop(key, None)
        group = self._group(key)
        self._foreign.pop(key, None)
        members = self._members.get(group)
        if members is not None and key in members:  # saved: its group's next part removes it
            del members[key]
            self._saved -= 1
            if not members:
                del self._members[group]
            self.log.remove(group, key)
        return entry

    def items(self) -> Iterator[tuple[Any, Any]]:
        return iter(self.entries.items())

    # -- saving ---------------------------------------------------------------------------------------------

    def columns(self, entries: list) -> list:
        """The saved form of entries, by column (a subclass packs its fields)."""
        return [entries]

    def loaded_entries(self, columns: list, name: str) -> Iterable[Any]:
        """The entries of a saved form's columns (`columns`' inverse)."""
        if len(columns) != 1:
            raise ValueError(f"state part {name!r}: {len(columns)} columns, not 1")
        return columns[0]

    def _own_group(self, key: Any) -> int:
        return (hash(key) + self.hash_shift) % GROUPS

    def _group(self, key: Any) -> int:
        """The group of a key of the store (saved or not)."""
        group = self._foreign.get(key) if self._foreign else None
        return self._own_group(key) if group is None else group

    def _new_keys(self) -> list:
        """The keys put since the last export that no group holds: the last ones of the dict (see above)."""
        new = len(self.entries) - self._saved
        return list(islice(reversed(self.entries), new))[::-1] if new > 0 else []

    def _by_group(self, keys: list) -> list[tuple[int, list[int]]]:
        """`keys` sorted into their own groups, in C: per group, the positions of its keys, in order."""
        groups = (np.fromiter(map(hash, keys), np.int64, len(keys)) + self.hash_shift) % GROUPS
        order = np.argsort(groups, kind="stable")
        sorted_groups = groups[order]
        bounds = [0, *(np.flatnonzero(np.diff(sorted_groups)) + 1).tolist(), len(keys)]
        positions = order.tolist()
        return [
            (int(sorted_groups[lo]), positions[lo:hi]) for lo, hi in zip(bounds, bounds[1:], strict=False)
        ]

    def _file_changes(self) -> None:
        """Sort the entries put since the last export into their groups (`_pending`), record them in the log,
        and add the new keys to their groups' members."""
        members, foreign, log = self._members, self._foreign, self.log
        new = self._new_keys()
        for group, at in self._by_group(new) if new else ():
            saved = members.get(group)
            if saved is None:
                saved = members[group] = {}
            saved.update(zip(_pick(new, at), repeat(None)))
        self._saved += len(new)
        changed = self._changed
        self._changed = {}
        self._pending = {}
        if not changed:
            return
        keys, entries = list(changed), list(changed.values())
        if foreign:  # a key put again leaves the group another process gave it for its own
            for key in keys:
                old = foreign.pop(key, None)
                if old is not None:
                    del members[old][key]
                    if not members[old]:
                        del members[old]
                    log.remove(old, key)
                    members.setdefault(self._own_group(key), {})[key] = None
        # saved columns per group: an entry may span several rows (a session store's key, its sessions)
        for group, at in self._by_group(keys):
            group_keys = _pick(keys, at)
            log.puts(group).extend(group_keys)
            self._pending[group] = (group_keys, self.columns(_pick(entries, at)))

    def _name(self, group: int) -> str:
        return f"{self.prefix}{group}"

    def _group_named(self, name: str) -> int:
        if not name.startswith(self.prefix) or not name[len(self.prefix) :].isdigit():
            raise ValueError(f"state part {name!r} is not a part of store {self.prefix!r}")
        return int(name[len(self.prefix) :])

    def _base(self, keys: list) -> dict[str, Any]:
        return {"keys": keys, "columns": self.columns(list(map(self.entries.__getitem__, keys)))}

    def export_parts(self, changed_only: bool) -> tuple[dict[str, Any], list[str]]:
        """Parts new or changed since the last export (every part unless `changed_only`), and the names of
        every current part."""
        self._file_changes()
        members, pending = self._members, self._pending

        def save(group: int, put: dict | None) -> dict[str, Any]:
            if put is None:
                return self._base(list(members[group]))
            if group not in pending:  # a group of removals only
                return {"keys": [], "columns": self.columns([])}
            keys, columns = pending[group]
            if len(keys) != len(put):  # keys removed since they were put: not before the export
                raise AssertionError(f"store {self.prefix!r}: group {group} changed while exported")
            return {"keys": keys, "columns": columns}

        try:
            return self.log.export(members, changed_only, self._name, save)
        finally:
            self._pending = {}

    def state_parts(self) -> dict[str, Any]:
        """A base per group, leaving the export history alone (a snapshot)."""
        members = {group: dict(keys) for group, keys in self._members.items()}
        for key in self._new_keys():
            members.setdefault(self._own_group(key), {})[key] = None
        return StoreLog.bases(members, self._name, lambda group: self._base(list(members[group])))

    def apply_parts(self, parts: Mapping[str, Any], removed: list[str]) -> None:
        """Catch up with the parts exported since (see StoreLog.catch_up)."""
        if self._changed or self._new_keys():
            raise ValueError(f"store {self.prefix!r}: changes not exported, cannot catch up")
        dropped, steps = self.log.catch_up(parts, removed, self._group_named)
        entries, members, foreign = self.entries, self._members, self._foreign
        for group in dropped:
            for key in members.pop(group, ()):
                del entries[key]
                foreign.pop(key, None)
        # Each group's net change first, then removals, then puts: a key moved between groups is in the
        # parts of both (removed from one, put into the other), whichever order the groups come in.
        net: dict[int, tuple[dict[Any, Any], set]] = {}
        for group, saved, gone in steps:
            name = self._name(group)
            keys = saved["keys"]
            loaded = list(self.loaded_entries(saved["columns"], name))
            if len(loaded) != len(keys):
                raise ValueError(f"state part {name!r}: {len(loaded)} entries for {len(keys)} keys")
            puts, removals = net.setdefault(group, ({}, set()))
            for key in gone:
                puts.pop(key, None)
                removals.add(key)
            puts.update(zip(keys, loaded, strict=True))
            removals.difference_update(keys)
        for group, (_, removals) in net.items():
            in_group = members.get(group)
            for key in removals:
                if in_group is not None and key in in_group:
                    del entries[key], in_group[key]
                    foreign.pop(key, None)
            if in_group is not None and not in_group:
                del members[group]
        for group, (puts, _) in net.items():
            in_group = members.get(group)
            if in_group is None:
                in_group = members[group] = {}
            for key in puts:
                if key not in in_group:
                    if key in entries:  # moved here from another group
                        old = self._group(key)
                        del members[old][key]
                        if not members[old]:
                            del members[old]
                    in_group[key] = None
                    if self._own_group(key) == group:
                        foreign.pop(key, None)
                    else:
                        foreign[key] = group
            entries.update(puts)
            if not in_group:
                del members[group]
        self._saved = sum(map(len, members.values()))


class TimestampedKeyValueStore(KeyValueStore):
    """key -> (value, timestamp): a table aggregation's store (rule 4.3). Saved as a column of values (an
    int64 array where they are all ints) and one of timestamps."""

    def get_values(self, keys: list) -> tuple[list, bool]:
        """Per key its entry's value, None where it has none, and whether every key has an entry."""
        entries = list(map(self.entries.get, keys))
        every = not any(map(is_, entries, repeat(None)))
        return [None if entry is None else entry[0] for entry in entries], every

    def columns(self, entries: list) -> list:
        if not entries:
            return [[], array("q")]
        values, stamps = zip(*entries, strict=True)  # one pass over the entries, in C
        return [int_column(values), array("q", stamps)]

    def loaded_entries(self, columns: list, name: str) -> Iterable[Any]:
        if len(columns) != 2 or len(columns[0]) != len(columns[1]):
            raise ValueError(f"state part {name!r}: not a column of values and one of timestamps")
        return zip(columns[0], columns[1], strict=True)


def split_parts(
    stores: Iterable[Any], parts: Mapping[str, Any], removed: list[str]
) -> list[tuple[Any, tuple[dict[str, Any], list[str]]]]:
    """A node's parts and removed part names, per store of the node (by the stores' `prefix`: a part is
    `<prefix><group>.<n>`, the group a number, negative for a join store's segment before time 0)."""
    by_prefix = {store.prefix: (store, ({}, [])) for store in stores}

    def of(name: str) -> tuple[dict[str, Any], list[str]]:
        prefix = name.rsplit(".", 1)[0].rstrip("0123456789").removesuffix("-")
        found = by_prefix.get(prefix)
        if found is None:
            raise ValueError(f"state part {name!r} belongs to none of the stores {sorted(by_prefix)}")
        return found[1]

    for name, part in parts.items():
        of(name)[0][name] = part
    for name in removed:
        of(name)[1].append(name)
    return list(by_prefix.values())
