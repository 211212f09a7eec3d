"""A window's str keys -> their rows, looked up and numbered a batch at a time in one C loop.

In a large window, looking a batch's keys up one by one in a dict costs several cache misses per key
(the dict's index, its entry, the int object of the row). pandas' hash table for Python objects (khash) keeps the rows as int64s next to the key
pointers and looks a whole array up in C, numbering the keys it does not hold in the same pass. It is
pandas' internal API (`pandas._libs.hashtable`), stable for years and pinned with pandas here. It is
imported at the first table (importing pandas is slow, which a test driver whose windows never grow large
should not pay); without pandas `KeyTable.new` returns None and the
window looks keys up in its dict.

The table holds borrowed references: its keys must be the very objects of the window's key list, which
keeps them alive. Only for windows whose rows are append-only (`WindowRows.rows_live`: a row never dies
and its keys are distinct), so rows `0..size` never change once added and the table only catches up.
Only for str keys: pandas' table treats float NaNs as equal to each other and skips null-like keys when
it numbers them, where a dict does neither; for str the two agree.
"""

from __future__ import annotations

from itertools import count as counter
from itertools import repeat
from operator import is_not
from typing import Any

import numpy as np

# Above this share of a batch's keys new to a table, the batch is to make a small table large (`number`
# then makes it an object array a chunk at a time).
MOSTLY_NEW = 0.4
# Above this share of a batch's keys new to the table, `number` numbers the batch without looking it up
# first: numbering probes the table once per key, as a look-up does, where a look-up then numbering probes
# it twice for each key it lacks (in a large table, a cache miss or more apiece). At or below it the batch
# is looked up first, for a batch a key may refuse to add no key (see `number`).
NUMBERED_AT_ONCE = 0.05
# A batch given as a list is made an object array and looked up this many keys at a time (`number`), by a
# table of at least CHUNKED_LOOKUP_KEYS keys (or a batch of as many keys, mostly distinct and new, that is to
# make it one): a smaller one's keys stay in the CPU's caches, and one array made whole costs less than the
# chunks' copies.
LOOKUP_CHUNK = 4096
CHUNKED_LOOKUP_KEYS = 1 << 16
# Keys looked up to estimate that share when no batch tells it (a table that has just caught up with its rows),
# and keys of a batch that tell whether a table built at it is for a store filling up (`table_size`).
SAMPLE = 1024
# Batches of new keys that a table built over a store filling up is sized for.
GROWTH_BATCHES = 3
# Keys a store's table (a key-value store's, a join's numbering) is sized for per key `table_size` counts:
# pandas' table keeps no hashes, and a look-up compares its key with the key of every bucket it probes
# before the right one (or an empty one), reading that key's object, at many keys a cache miss apiece.
# pandas sizes a table at most 0.77 full (its buckets a power of two): one sized for twice its keys is at
# most 0.39 full, and a look-up probes fewer buckets (about 1.15 per key found at a quarter full, 1.4 at
# half full), for 16 bytes per bucket. A table built over the keys a store holds is sized for twice them
# already (room to grow).
SPARSE_TABLE = 2


class KeyTable:
    """Rows `0..size` of a window by key, and `pending` keys numbered after them that the window has not
    appended yet (see `number`)."""

    __slots__ = ("_table", "size", "pending", "_missed")

    def __init__(self, table: Any) -> None:
        self._table = table
        self.size = 0
        self.pending = 0
        # the share of the last numbered batch's keys that were new to the table (None: no batch numbered
        # since it caught up with its rows, `add`)
        self._missed: float | None = 1.0

    @staticmethod
    def new(size_hint: int) -> KeyTable | None:
        """An empty table sized for `size_hint` keys (growing it rehashes every key, each a cache miss);
        None without pandas."""
        try:
            from pandas._libs.hashtable import PyObjectHashTable
        except ImportError:  # the engine runs without pandas; windows then look keys up in their dicts
            return None
        return KeyTable(PyObjectHashTable(size_hint))

    def add(self, keys: Any) -> bool:
        """Rows `size..size + len(keys)` for `keys` (a list or an object array; distinct, new to the table);
        False, and nothing added, when one is not a str."""
        if len(keys) and set(map(type, keys)) != {str}:
            return False
        if len(keys):
            self.number(as_object_array(keys))
            self.confirm(len(keys))
            self._missed = None  # whether the next batch's keys are among them: a sample says
        return True

    def row(self, key: str) -> int:
        """One key's row, -1 where the table has none: for a batch of a few keys, without numpy's cost per
        call."""
        try:
            return self._table.get_item(key)
        except KeyError:
            return -1

    def append(self, key: str) -> None:
        """Row `size` for `key` (a str new to the table; no keys pending)."""
        self._table.set_item(key, self.size)
        self.size += 1

    def lookup(self, keys: Any) -> np.ndarray:
        """Per key (a list or an object array) its row, -1 where the table has none (an unhashable key
        raises TypeError)."""
        return self._table.lookup(as_object_array(keys)).astype(np.int64, copy=False)

    def number(
        self,
        keys: Any,
        numbered: np.ndarray | None = None,
        str_only: bool = False,
        none_keys: bool = False,
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """Per key (an object array, or a list) its row, or for a key the table does not hold `size` + the
        rank of its first appearance among those; and those keys in that order, now `pending`: rows the
        window is to append next (`confirm`). A None key is numbered -1 and not added (with `str_only`,
        and not `none_keys`: a batch the caller refuses), and so may another null-like key (a NaN), which
        the table may also number and add like any other (see `_labels`: the caller checks the types of
        the new keys); an unhashable one raises TypeError, some keys possibly added (the table is then to
        be dropped).
        `numbered`: a mask of the keys to number (None: every key), the others numbered -1 and never added
        (a late record's key, which its window does not append).

        `str_only`: None where a key to number that the table does not hold is not a str (a null key, an
        int): a batch the caller refuses. Nothing is added then when the batch was looked up first (only the
        keys the table lacks are checked, after the look-up has read them); else `pending` says that keys
        were added that no window appends, and the table is to be dropped. `none_keys` (with `str_only`): a
        None key is numbered -1 and not added, rather than refused (a NaN still is).

        Where the table held nearly all of the previous batch's keys (or of a sample of this batch's, after
        it caught up with its rows; NUMBERED_AT_ONCE), the batch is looked up first and only the keys the
        table does not hold are numbered: a look-up costs no more per key than numbering (which, where None
        keys are numbered -1 and the batch holds one, also checks each key for a null: `_labels`), and a
        batch then refused adds no key. Else (a table still filling up) the batch is numbered at once: each
        key the table lacks would be probed for twice. A list looked up by a large table, or numbered into a
        table that it is to make large, is made an object array a chunk at a time (`_by_chunk`); where no key
        can refuse the batch (not `str_only`), each chunk's keys the table does not hold are numbered with the
        chunk, while they and the buckets probed for them are in the CPU's caches, not after the whole batch
        was looked up."""
        from pandas._libs.hashtable import ObjectVector

        new = ObjectVector()
        new_keys = None  # else those in `new`
        skip_nulls = none_keys or not str_only
        missed = self._missed
        listed = type(keys) is not np.ndarray
        # a large table, or one that a large batch of mostly new, mostly distinct keys is to make large
        chunked = listed and (
            self.size >= CHUNKED_LOOKUP_KEYS
            or (
                missed is not None
                and missed > MOSTLY_NEW
                and len(keys) >= CHUNKED_LOOKUP_KEYS
                and mostly_distinct(keys)
            )
        )
        if listed and not chunked:
            keys = object_array(keys)
        if missed is None:  # the share of a sample of the keys (looked up again below: then in the caches)
            sample = self._table.lookup(object_array(keys[:SAMPLE]) if chunked else keys[:SAMPLE])
            missed = float(np.count_nonzero(sample < 0)) / max(len(sample), 1)
        # a batch no key refuses, looked up a chunk at a time: each chunk's keys the table lacks are numbered
        # with it (`_by_chunk`)
        by_chunk = chunked and not str_only
        if missed > NUMBERED_AT_ONCE or by_chunk:
            if chunked:
                numbers, _, unlabelled, new_keys = self._by_chunk(
                    keys, skip_nulls, numbered, numbering=True, looked_up=missed <= NUMBERED_AT_ONCE
                )
            else:
                labelled = keys if numbered is None else keys[numbered]
                labels = self._labels(labelled, new, self.size, skip_nulls).astype(np.int64, copy=False)
                unlabelled = labelled[labels < 0]
                if numbered is None:
                    numbers = labels
                else:
                    numbers = np.full(len(keys), -1, np.int64)
                    numbers[numbered] = labels
            refused = str_only and len(unlabelled) > 0  # the null-like keys, labelled -1 (`skip_nulls`)
            if refused and none_keys:  # refused for one that is not None
                refused = any(map(is_not, unlabelled, repeat(None)))
        else:
            if chunked:
                numbers, missing, missing_keys, _ = self._by_chunk(keys, skip_nulls, numbered)
            else:
                numbers = self._table.lookup(keys).astype(np.int64, copy=False)
                unheld = numbers < 0
                if numbered is not None:
                    numbers[~numbered] = -1
                    unheld &= numbered
                missing = np.flatnonzero(unheld)
                missing_keys = keys[missing]
            if len(missing):
                missing_types = set(map(type, missing_keys))
                if none_keys:
                    missing_types.discard(type(None))
                if str_only and missing_types - {str}:
                    self.pending = 0
                    return None
                numbers[missing] = self._labels(missing_keys, new, self.size, skip_nulls)
            refused = False
        if new_keys is None:
            new_keys = new.to_array()
        self.pending = len(new_keys)
        to_number = len(keys) if numbered is None else int(np.count_nonzero(numbered))
        if to_number:
            self._missed = len(new_keys) / to_number
        if refused or (str_only and len(new_keys) and set(map(type, new_keys)) != {str}):
            return None
        return numbers, new_keys

    def _by_chunk(
        self,
        keys: list,
        skip_nulls: bool,
        numbered: np.ndarray | None,
        numbering: bool = False,
        looked_up: bool = False,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]:
        """Per key of a list its row, -1 where none, and the keys without one (their positions, and the
        keys, an object array), LOOKUP_CHUNK keys at a time: each chunk is made an object array, looked up,
        and its keys without a row taken, while the array's references to them (a write to each object)
        have left them in the CPU's caches, where a batch of many keys made an array whole first has left
        the caches by the time the look-up reads its first keys again (and then again as the array goes,
        its references dropped). `numbering`: the keys the table does not hold are numbered as they come
        (`size` + the rank of their first appearance; a null-like key -1 where `skip_nulls`, see
        `_labels`: the keys without a row then) and added, and returned fourth, in that order (else
        None); `looked_up` (with `numbering`): each chunk is looked up first and only its keys the table
        lacks are numbered (`_rows`). `numbered`: a mask of the keys to number (None: every key), the
        others -1, never numbered (nor among the keys without a row)."""
        n = len(keys)
        numbers = np.empty(n, np.int64)
        unheld: list[np.ndarray] = [np.empty(0, np.int64)]
        unheld_keys: list[np.ndarray] = [np.empty(0, object)]
        added: list[np.ndarray] = []
        count = self.size
        for lo in range(0, n, LOOKUP_CHUNK):
            chunk = object_array(keys[lo : lo + LOOKUP_CHUNK])
            asked = None if numbered is None else numbered[lo : lo + len(chunk)]
            if numbering and asked is not None and not asked.all():
                rows = np.full(len(chunk), -1, np.int64)
                rows[asked] = self._rows(chunk[asked], numbering, count, skip_nulls, added, looked_up)
            else:
                rows = self._rows(chunk, numbering, count, skip_nulls, added, looked_up)
                if asked is not None:
                    rows[~asked] = -1
            if numbering:
                count += len(added[-1])
            numbers[lo : lo + len(chunk)] = rows
            at = np.flatnonzero(rows < 0 if asked is None else (rows < 0) & asked)
            if len(at):
                unheld.append(at + lo)
                unheld_keys.append(chunk[at])
        new_keys = (np.concatenate(added) if added else np.empty(0, object)) if numbering else None
        return numbers, np.concatenate(unheld), np.concatenate(unheld_keys), new_keys

    def _rows(
        self,
        keys: np.ndarray,
        numbering: bool,
        first: int,
        skip_nulls: bool,
        added: list[np.ndarray],
        looked_up: bool = False,
    ) -> np.ndarray:
        """Per key (an object array) its row, -1 where none; `numbering`: the keys the table does not hold
        numbered from `first` on and added (`_labels`), appended to `added`, an object array. `looked_up`:
        the keys are looked up first and only those the table lacks are numbered (a look-up costs less per
        key than numbering, which checks each key for a null: for keys the table mostly holds)."""
        if not numbering:
            return self._table.lookup(keys)
        from pandas._libs.hashtable import ObjectVector

        new = ObjectVector()
        if looked_up:
            rows = self._table.lookup(keys).astype(np.int64, copy=False)
            missing = np.flatnonzero(rows < 0)
            if len(missing):
                rows[missing] = self._labels(keys[missing], new, first, skip_nulls)
        else:
            rows = self._labels(keys, new, first, skip_nulls)
        added.append(new.to_array())
        return rows

    def _labels(self, keys: np.ndarray, new: Any, first: int, skip_nulls: bool) -> np.ndarray:
        """Per key (an object array) its row, or for a key the table does not hold `first` + the rank of
        its first appearance among those, which are added and appended to `new` (an ObjectVector), in that
        order. `skip_nulls`: a None key is numbered -1 and not added. pandas' get_labels (`ignore_na`) does
        so for any null-like key (None, NaN), checking every key for one (several type checks apiece): it
        is asked of keys among which their pointers, in numpy, find a None (`holds_none_object`), and
        otherwise every key is numbered as it is, a third less per key. A null-like key that is not None
        (a NaN) may then be numbered and added like any other: the table holds str keys only, and each
        caller checks the types of the keys new to it, or knows every key to be a str (a batch a key that
        is not a str refuses, `str_only`; a key-value store that then drops its table). Without
        `skip_nulls`, every key is numbered as it is: for a batch that a null key refuses (`str_only`),
        where the check of the new keys' types finds one (a null key is always new to the table), the
        table then to be dropped if it took keys."""
        _, labels = self._table._unique(
            keys,
            new,
            count_prior=first,
            na_sentinel=-1,
            na_value=None,
            ignore_na=skip_nulls and holds_none_object(keys),
            return_inverse=True,
        )
        return labels

    def confirm(self, appended: int) -> None:
        """The window appended its `pending` keys as rows."""
        self.size += appended
        self.pending = 0


def table_size(keys: Any, held: int) -> int:
    """The keys to size a table for that is built over `held` keys at a batch `keys`: those and the batch's
    or, for a store that holds fewer keys than the batch and whose batch's sampled keys are mostly distinct
    (a store filling up with many keys), `held` and GROWTH_BATCHES batches: a table that grows rehashes
    every key it holds, each a cache miss, twice on the way to that size. A store of a few keys keeps a
    small table, and one that holds more keys than a batch (a restored store) is sized by them."""
    batches = GROWTH_BATCHES if held < len(keys) and mostly_distinct(keys) else 1
    return held + batches * len(keys)


def mostly_distinct(keys: Any) -> bool:
    """Whether a batch's first SAMPLE keys are mostly distinct: a batch of many keys (False where one is
    unhashable: the numbering raises it)."""
    sample = keys[:SAMPLE]
    try:
        return 2 * len(set(sample)) > len(sample)
    except TypeError:
        return False


def object_array(items: list) -> np.ndarray:
    """`items` as a one-dimensional object array, an element per item (np.array would make a list of
    tuples, composite keys, into a two-dimensional array), filled in C."""
    return np.fromiter(items, object, len(items))


def as_object_array(keys: Any) -> np.ndarray:
    """`keys` as an object array: an object array as it is, a list gathered into one (`object_array`)."""
    return keys if type(keys) is np.ndarray else object_array(keys)


def holds_none_object(objects: np.ndarray) -> bool:
    """Whether an object array holds None, by its pointers in numpy: no object is read, where a pass over a
    list (base.holds_none) takes a reference to each item, a write to each object (a cache miss apiece in
    a batch of many keys)."""
    return bool((np.frombuffer(objects, np.intp) == id(None)).any())


def same_keys(keys: np.ndarray, others: np.ndarray) -> bool:
    """Whether two object arrays hold equal keys, row for row: compared by identity first (their pointers,
    in numpy, without reading a key: two stores whose rows the same puts appended hold the same objects),
    then, where the objects differ, as two lists compare (an import gives each store its own copies)."""
    if len(keys) != len(others):
        return False
    if np.array_equal(np.frombuffer(keys, np.intp), np.frombuffer(others, np.intp)):
        return True
    return keys.tolist() == others.tolist()


def number_by_first_appearance(keys: list, first: int) -> tuple[np.ndarray, np.ndarray]:
    """Per key `first` + the rank of its first appearance among `keys`, and the distinct keys in that
    order (an object array, gathered in C). An unhashable key raises TypeError."""
    first_of: dict = {}
    firsts = np.fromiter(map(first_of.setdefault, keys, counter()), np.int64, len(keys))
    numbers = np.empty(len(keys), np.int64)  # at the position of each key's first appearance, its number
    numbers[np.fromiter(first_of.values(), np.int64, len(first_of))] = np.arange(first, first + len(first_of))
    return numbers[firsts], np.fromiter(first_of, object, len(first_of))


def grown_capacity(rows: int, capacity: int, added: int = 0) -> int | None:
    """The capacity a store of numbered rows grows to for `rows` rows (doubling, so that appends cost
    amortized O(1)); None when `capacity` holds them already. `added`: the rows of a batch appended at once
    (new keys), room being made for GROWTH_BATCHES such batches, as for a key table (`table_size`): a
    store filling up with many keys grows once, where doubling copies its key column at each growth, a
    reference taken to each key (a write to the object, a cache miss apiece among many keys), and one
    dropped from the old column."""
    if rows <= capacity:
        return None
    return max(rows, 2 * capacity, rows + (GROWTH_BATCHES - 1) * added, 16)


def grown(column: np.ndarray, size: int, capacity: int) -> np.ndarray:
    """A copy of `column`'s first `size` values, `capacity` long (zeros after them, or None for objects)."""
    out = np.empty(capacity, object) if column.dtype == object else np.zeros(capacity, column.dtype)
    out[:size] = column[:size]
    return out


class KeyNumbers:
    """Keys numbered 0, 1, ... in order of first appearance, looked up a batch at a time, across several
    stores (a windowed node's windows, a join's two sides): a batch's keys are looked up once each, and
    each store finds its records by number, in numpy. In a `KeyTable` while every key numbered is a str
    (the caller says so) and pandas is at hand, else in a dict (from the first key that is not a str on,
    for good). `keys` holds the keys by number (numbers `len(self)..` hold None), which keeps the objects
    the table borrows alive: an object array, which the cyclic collector does not scan (it scans a list's
    every item after each micro-batch, a cache miss per key). The numbers outlive the records of their
    keys: `stale` says when to number afresh."""

    __slots__ = ("keys", "_count", "_table", "_index")

    # numbered afresh once the numbers are this many times the stores' rows or records (and MIN_STALE)
    STALE_FACTOR = 2
    MIN_STALE = 1 << 16

    def __init__(self) -> None:
        self.keys = np.empty(0, object)
        self._count = 0  # keys numbered
        self._table: KeyTable | None = None  # built at the first batch of str keys
        self._index: dict | None = None  # the dict, once a key is not a str or pandas is missing

    def __len__(self) -> int:
        return self._count

    def _hold(self, new_keys: np.ndarray) -> None:
        """Numbers `len(self)..` for `new_keys` (an object array), in order."""
        end = self._count + len(new_keys)
        capacity = grown_capacity(end, len(self.keys), len(new_keys))
        if capacity is not None:
            self.keys = grown(self.keys, self._count, capacity)
        self.keys[self._count : end] = new_keys
        self._count = end

    def number(self, keys: Any, str_keys: bool = True) -> np.ndarray:
        """Per key (a list or an object array) its number, the keys new to the numbering taking the next
        ones (`str_keys`: every key is a str). An unhashable key raises TypeError."""
        if str_keys:
            numbers = self._number_in_table(keys, str_only=False)
            if numbers is not None:
                return numbers
        index = self._dict()
        numbers = np.fromiter(map(index.get, keys, repeat(-1)), np.int64, len(keys))
        new = np.flatnonzero(numbers < 0)
        if len(new):
            first = self._count
            numbered, new_keys = number_by_first_appearance([keys[i] for i in new.tolist()], first)
            numbers[new] = numbered
            index.update(zip(new_keys.tolist(), range(first, first + len(new_keys)), strict=True))
            self._hold(new_keys)
        return numbers

    def number_str(self, keys: Any, none_keys: bool = False) -> np.ndarray | None:
        """`number` of a batch (a list or an object array) whose keys are not known to be all str, numbered
        in the KeyTable where every key new to it is a str (the only keys it checks: the table holds str
        keys only, so a batch's keys are not read one more time each); None, nothing numbered, where one is
        not (a null key, an int) or the numbers are not in a table (a key before was not a str, or pandas
        is missing): the caller then reads the keys' types. `none_keys`: a None key is numbered -1 (and
        not added) rather than refused. An unhashable key raises TypeError."""
        return self._number_in_table(keys, str_only=True, none_keys=none_keys)

    def _number_in_table(self, keys: Any, str_only: bool, none_keys: bool = False) -> np.ndarray | None:
        """The keys' numbers from the KeyTable (built at the first batch), None where the numbers are in a
        dict or pandas is missing, or (`str_only`) where a key new to the table is not a str: then nothing
        is numbered, and a table that took keys of the refused batch is built again from the numbered ones."""
        if self._index is not None:
            return None
        table = self._table
        if table is None:
            table = self._table = KeyTable.new(SPARSE_TABLE * max(table_size(keys, 0), SAMPLE))
            if table is None:
                return None
        numbering = table.number(keys, str_only=str_only, none_keys=none_keys)
        if numbering is None:
            if table.pending:  # the table numbered the batch at once and holds keys not numbered here
                self._table = KeyTable.new(max(2 * self._count, SAMPLE))
                self._table.add(self.keys[: self._count].tolist())
            return None
        numbers, new_keys = numbering
        table.confirm(len(new_keys))
        self._hold(new_keys)
        return numbers

    def lookup(self, keys: list) -> np.ndarray:
        """Per key its number, -1 for a key not numbered. An unhashable key raises TypeError."""
        if self._index is None:
            if self._table is None:
                return np.full(len(keys), -1, np.int64)
            return self._table.lookup(keys)
        return np.fromiter(map(self._index.get, keys, repeat(-1)), np.int64, len(keys))

    def str_only(self) -> bool:
        """Whether the keys are numbered in the KeyTable (every one a str)."""
        return self._table is not None

    def stale(self, held: int) -> bool:
        """Whether the numbers, next to the `held` rows or records of the stores, are mostly of keys gone."""
        return self._count > max(self.STALE_FACTOR * held, self.MIN_STALE)

    def _dict(self) -> dict:
        if self._index is None:
            self._index = dict(zip(self.keys[: self._count].tolist(), range(self._count), strict=True))
            self._table = None
        return self._index
