"""An entries' part holds its keys as the bytes of the pickled list, so that a load unpickles equal keys once.

Two stores of a task often save the same keys: a final suppress buffer's rows are its count's rows
(nodes/final_window_count.py), so a window's new keys (a delta) or all its keys (a base) are in both
stores' parts. Unpickled from each part, every key would become two string objects, one per store, each
made in its own pass (at a few hundred thousand keys the stores' lists no longer fit in the CPU's caches).
With the keys as bytes, a load compares them (a memcmp) and unpickles equal bytes once: the stores then
share the key objects again, as they did in the task that exported them. Parts of the earlier form (the
list itself) load as they are.

Only the saved forms of entries' parts, `(saved entries, removed keys)` with the entries a dict under
"keys" (nodes/store_log.py), are packed; the part is otherwise as the store saved it. An export still
pickles each store's keys: the second pickling finds them in the caches, and checking that two lists hold
the same objects costs about what it would save (measured in the engine benchmark).
"""

from __future__ import annotations

import io
import pickle
from typing import Any


def dumps_plain(obj: Any) -> bytes:
    """Pickle without the memo: 5-7x faster for columns of str and bytes (no memo entry per object) and the
    same bytes to load. Only for the parts nodes build of plain columns, which share no object and hold no
    cycle (the memo would keep a shared object shared; a cycle raises ValueError)."""
    buffer = io.BytesIO()
    pickler = pickle.Pickler(buffer, protocol=5)
    pickler.fast = True
    pickler.dump(obj)
    return buffer.getvalue()


def dumps_entries_part(state: Any) -> bytes:
    """An entries' part's bytes: `state` pickled (dumps_plain) with its list of keys as that list's bytes."""
    saved = state[0] if type(state) is tuple and len(state) == 2 else None
    keys = saved.get("keys") if type(saved) is dict else None
    if type(keys) is list and keys:
        state = ({**saved, "keys": dumps_plain(keys)}, state[1])
    return dumps_plain(state)


class KeyListLoader:
    """One import's or catch-up's entries' parts, each list of keys unpickled once."""

    def __init__(self) -> None:
        # (length, last 64 bytes) -> [(the bytes of a list of keys, the list)]
        self._loaded: dict[tuple[int, bytes], list[tuple[bytes, list]]] = {}

    def loads(self, data: bytes) -> Any:
        """The part as the store saved it: its keys a list again (the same list for equal bytes, which the
        stores only read)."""
        state = pickle.loads(data)
        saved = state[0] if type(state) is tuple and len(state) == 2 else None
        if type(saved) is dict and type(saved.get("keys")) is bytes:
            saved["keys"] = self._keys(saved["keys"])
        return state

    def _keys(self, data: bytes) -> list:
        loaded = self._loaded.setdefault((len(data), data[-64:]), [])
        for earlier, keys in loaded:
            if earlier == data:
                return keys
        keys = pickle.loads(data)
        loaded.append((data, keys))
        return keys
