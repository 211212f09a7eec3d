"""An entries' part holds its keys as pickled lists (bytes), so that a load unpickles equal keys once.

Two stores of a task often save the same keys: a final suppress buffer's rows are its count's rows
(nodes/final_window_count.py), so a window's new keys (a delta) or all its keys (a base) are in both
stores' parts. Unpickled from each part, every key would become two string objects, one per store, each
made in its own pass (at a few hundred thousand keys the stores' lists no longer fit in the CPU's caches).
With the keys as bytes, a load compares them (a memcmp) and unpickles equal bytes once: the stores then
share the key objects again, as they did in the task that exported them.

WindowRows saves its keys as a tuple of pickled lists already (chunks: the fused pass pickles a batch's
new keys once for both stores as it appends them, nodes/window_rows.py); another saved form whose
entries are a dict with a list under "keys" has that list pickled here (`dumps_entries_part`). Parts of
the earlier form (the list itself) load as they are.
"""

from __future__ import annotations

import pickle
from typing import Any

from ..nodes.window_rows import dump_plain, dumps_plain


def dumps_entries_part(state: Any) -> bytes:
    """An entries' part's bytes: `state` pickled (dumps_plain) with its list of keys as that list's bytes."""
    return dumps_plain(_with_pickled_keys(state))


def dump_entries_part(state: Any, file: Any) -> None:
    """`dumps_entries_part` into a binary file."""
    dump_plain(_with_pickled_keys(state), file)


def _with_pickled_keys(state: Any) -> Any:
    saved = state[0] if type(state) is tuple and len(state) == 2 else None
    keys = saved.get("keys") if type(saved) is dict else None
    if type(keys) is list and keys:
        return ({**saved, "keys": dumps_plain(keys)}, state[1])
    return state


class KeyListLoader:
    """One import's or catch-up's entries' parts, each list of keys unpickled once."""

    def __init__(self) -> None:
        # (length, last 64 bytes) -> [(the bytes of a pickled list of keys, the list)]
        self._loaded: dict[tuple[int, bytes], list[tuple[bytes, list]]] = {}

    def loads(self, data: bytes) -> Any:
        """The part as the store saved it: its keys a list again (the same list for equal bytes, which the
        stores only read)."""
        state = pickle.loads(data)
        saved = state[0] if type(state) is tuple and len(state) == 2 else None
        keys = saved.get("keys") if type(saved) is dict else None
        if type(keys) is bytes:
            saved["keys"] = self._keys(keys)
        elif type(keys) is tuple and keys and type(keys[0]) is bytes:  # pickled lists (WindowRows)
            saved["keys"] = self._keys(keys[0]) if len(keys) == 1 else self._joined(keys)
        return state

    def _joined(self, chunks: tuple[bytes, ...]) -> list:
        keys: list = []
        for data in chunks:
            keys += self._keys(data)
        return keys

    def _keys(self, data: bytes) -> list:
        loaded = self._loaded.setdefault((len(data), data[-64:]), [])
        for earlier, keys in loaded:
            if earlier == data:
                return keys
        keys = pickle.loads(data)
        loaded.append((data, keys))
        return keys
