"""Landing-directory files -> validated records per partition, and quarantined records with reasons.

Python with numpy and pyarrow, no Spark: the Spark runtime calls it on executors, one whole file at a
time (files are never split, so line numbers are exact), and the in-memory runner calls it directly.

Lines are strict JSON (RFC 8259, decoded with msgspec): NaN, Infinity, numbers out of float range and lone
surrogates are unparseable. Input fields: `key` (string), `value` (any JSON), `timestamp` (epoch ms, integer
>= 0), and optionally `partition` (integer in [0, partitions)) and `offset` (integer >= 0). A record without
`partition` goes to `partition_for_key(key)`. Blank lines are not records. Anything else that is not a valid
record is quarantined with its reason, raw text, file and line; nothing is dropped silently.
"""

from __future__ import annotations

import gzip
import io
import json
import zlib
from dataclasses import dataclass, field
from operator import attrgetter, itemgetter
from typing import Any

import msgspec
import numpy as np
import pyarrow as pa

INT64_MAX = 2**63 - 1

# msgspec: strict (it refuses NaN and Infinity, which the json module takes); one decoder for every line.
decode_json = msgspec.json.Decoder().decode
# Invalid UTF-8 raises UnicodeDecodeError (a ValueError), nesting deeper than msgspec goes RecursionError.
_JSON_ERRORS = (msgspec.DecodeError, msgspec.ValidationError, ValueError, RecursionError)

PARQUET_SUFFIXES = (".parquet", ".pq")


class Reason:
    """Quarantine reasons: one stable string per kind of bad record (tests and dashboards group by them)."""

    UNREADABLE_FILE = "unreadable file"
    INVALID_UTF8 = "invalid UTF-8"
    UNPARSEABLE = "unparseable JSON"
    NOT_AN_OBJECT = "not a JSON object"
    MISSING_KEY = "missing key"
    ILL_TYPED_KEY = "ill-typed key"
    MISSING_TIMESTAMP = "missing timestamp"
    ILL_TYPED_TIMESTAMP = "ill-typed timestamp"
    NEGATIVE_TIMESTAMP = "negative timestamp"
    ILL_TYPED_PARTITION = "ill-typed partition"
    PARTITION_OUT_OF_RANGE = "partition out of range"
    ILL_TYPED_OFFSET = "ill-typed offset"

    ALL = (
        UNREADABLE_FILE,
        INVALID_UTF8,
        UNPARSEABLE,
        NOT_AN_OBJECT,
        MISSING_KEY,
        ILL_TYPED_KEY,
        MISSING_TIMESTAMP,
        ILL_TYPED_TIMESTAMP,
        NEGATIVE_TIMESTAMP,
        ILL_TYPED_PARTITION,
        PARTITION_OUT_OF_RANGE,
        ILL_TYPED_OFFSET,
    )


def partition_for_key(key: str, num_partitions: int) -> int:
    """Stable across processes and Python versions: crc32 of the UTF-8 key (never `hash()`, which is salted)."""
    return zlib.crc32(key.encode("utf-8")) % num_partitions


# crc32's table, from zlib itself: starting from a zero register (previous value 0xFFFFFFFF, which zlib
# inverts), one byte b leaves the register at table[b], which zlib returns inverted.
_CRC32_TABLE = np.array([zlib.crc32(bytes([b]), 0xFFFFFFFF) ^ 0xFFFFFFFF for b in range(256)], np.uint32)


def crc32_of_strings(strings: pa.StringArray) -> np.ndarray:
    """`zlib.crc32` of each string's UTF-8 bytes, for a whole array at once (uint32): byte position by byte
    position over every string still that long, the strings taken longest first. A few array operations
    per position instead of a Python call per string, which `partition_for_key` makes key by key."""
    n = len(strings)
    offsets = np.frombuffer(strings.buffers()[1], dtype=np.int32, count=n + 1, offset=strings.offset * 4)
    data = np.frombuffer(strings.buffers()[2], dtype=np.uint8) if n else np.empty(0, np.uint8)
    lengths = np.diff(offsets)
    longest_first = np.argsort(-lengths, kind="stable")
    starts = offsets[:-1][longest_first].astype(np.int64)
    # still_long[j]: how many strings are longer than j (they are the first ones, longest first)
    still_long = np.searchsorted(-lengths[longest_first], -np.arange(int(lengths.max(initial=0))))
    crc = np.full(n, 0xFFFFFFFF, dtype=np.uint32)
    for position, count in enumerate(still_long.tolist()):
        head = crc[:count]
        crc[:count] = _CRC32_TABLE[(head ^ data[starts[:count] + position]) & 0xFF] ^ (head >> 8)
    result = np.empty(n, dtype=np.uint32)
    result[longest_first] = crc ^ np.uint32(0xFFFFFFFF)
    return result


class PartitionRecords:
    """Valid records of one file for one partition, in file order (columnar).

    Values are either decoded (`values`) or, from the bulk JSON path, still JSON text (`values_json`, one
    `msgspec.Raw` per record, known to decode): the task decodes them, a whole chunk in one call. A file
    read without its values (`keep_values=False`) has neither (`values` is None). The bulk
    paths keep timestamps, lines and key codes as int64/int32 arrays (no Python object per record; the
    list properties convert them when asked) and number the keys (`key_codes` into `key_table`, the
    distinct keys of this partition's records in the file), so that a chunk carries each distinct key
    once; `keys` is then built only when asked for.
    """

    __slots__ = (
        "_keys",
        "values",
        "_timestamps",
        "offsets",
        "_lines",
        "values_json",
        "key_table",
        "key_codes",
    )

    def __init__(
        self,
        keys: list[str] | None = None,
        values: list[Any] | None = None,
        timestamps: list[int] | np.ndarray | None = None,
        offsets: list[int | None] | None = None,
        lines: list[int] | np.ndarray | None = None,
        values_json: list[msgspec.Raw] | None = None,
        key_table: list[str] | None = None,
        key_codes: np.ndarray | None = None,
        values_kept: bool = True,
    ):
        self._keys = [] if keys is None and key_codes is None else keys  # None: built from the codes
        self.values = None if not values_kept else [] if values is None else values
        self._timestamps = [] if timestamps is None else timestamps
        self.offsets = [] if offsets is None else offsets
        self._lines = [] if lines is None else lines
        self.values_json = values_json
        self.key_table = key_table
        self.key_codes = key_codes  # int32 per record, its key's place in key_table; None: not numbered

    @property
    def keys(self) -> list[str]:
        if self._keys is None:
            self._keys = gather(self.key_table, self.key_codes)
        return self._keys

    @property
    def timestamps(self) -> list[int]:
        if type(self._timestamps) is np.ndarray:
            self._timestamps = self._timestamps.tolist()
        return self._timestamps

    @property
    def lines(self) -> list[int]:
        if type(self._lines) is np.ndarray:
            self._lines = self._lines.tolist()
        return self._lines

    def timestamp_array(self) -> np.ndarray:
        return np.asarray(self._timestamps, dtype=np.int64)

    def first_line(self, index: int) -> int:
        return int(self._lines[index])

    def __len__(self) -> int:
        return len(self._timestamps)

    def decoded_values(self) -> list[Any]:
        if self.values_json is not None:
            return decode_json_values(self.values_json)
        return [None] * len(self) if self.values is None else self.values


def gather(items: list, positions: np.ndarray) -> list:
    """items[positions] as a list (one C loop; itemgetter of one position returns the item, not a tuple)."""
    if len(positions) == 1:
        return [items[int(positions[0])]]
    return list(itemgetter(*positions.tolist())(items)) if len(positions) else []


def decode_json_values(raws) -> list[Any]:
    """Decode JSON texts that are each exactly one valid value, in one call (as one JSON array)."""
    return decode_json(b"[" + b",".join(raws) + b"]")


_DIGITS_TO_ZERO = bytes.maketrans(b"0123456789", b"0000000000")
_LONG_DIGIT_RUN = b"0" * 300


def _surely_decodable(json_texts: bytes) -> bool:
    """True when JSON text that msgspec has syntax-checked without decoding it (as `Raw`) is sure to
    decode. Skipping checks escapes and surrogates but not two things: UTF-8 outside the escapes, and
    numbers beyond float range, which need an exponent (a digit followed by e or E) or hundreds of digits.
    False means "maybe not": decode to find out. A scan of the bytes instead of a decode that would be
    thrown away."""
    if not json_texts.isascii():
        try:
            json_texts.decode("utf-8")
        except UnicodeDecodeError:
            return False
    text = np.frombuffer(json_texts, dtype=np.uint8)
    digit = (text - ord("0")) < 10  # uint8 arithmetic wraps: bytes below "0" become large
    if np.any(digit[:-1] & ((text[1:] | 0x20) == ord("e"))):
        return False
    # A run of 300 digits or more covers two consecutive multiples of 150: only then look closer.
    sampled = digit[::150]
    if np.any(sampled[:-1] & sampled[1:]):
        return _LONG_DIGIT_RUN not in json_texts.translate(_DIGITS_TO_ZERO)
    return True


@dataclass
class QuarantinedRecords:
    """Bad records of one file (columnar): 1-based line (row index + 1 for Parquet), reason, raw text."""

    lines: list[int] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    raws: list[str] = field(default_factory=list)

    def add(self, line: int, reason: str, raw: str) -> None:
        self.lines.append(line)
        self.reasons.append(reason)
        self.raws.append(raw)

    def __len__(self) -> int:
        return len(self.lines)


@dataclass
class LandingFile:
    """One parsed file: valid records grouped by partition, plus its quarantine."""

    path: str
    by_partition: dict[int, PartitionRecords] = field(default_factory=dict)
    quarantined: QuarantinedRecords = field(default_factory=QuarantinedRecords)

    @property
    def records_read(self) -> int:
        return sum(len(p) for p in self.by_partition.values()) + len(self.quarantined)


def is_parquet(path: str) -> bool:
    name = path.lower()
    if name.endswith(".gz"):
        name = name[:-3]
    return name.endswith(PARQUET_SUFFIXES)


def read_landing_file(
    path: str, content: bytes | None, num_partitions: int, keep_values: bool = True
) -> LandingFile:
    """Parse one landing file (JSON lines, or Parquet by suffix; `.gz` is decompressed first). Without
    `content`, the file is read from `path` here; a file that cannot be read is one quarantined record.
    `keep_values=False` (for a topology that never reads them): the bulk JSON path checks that each value
    is valid JSON and keeps none of them (records get None); the other paths keep them anyway."""
    parsed = LandingFile(path=path)
    if content is None:
        try:
            with open(path, "rb") as f:
                content = f.read()
        except OSError as exc:
            parsed.quarantined.add(0, Reason.UNREADABLE_FILE, f"{type(exc).__name__}: {exc}")
            return parsed
    if path.lower().endswith(".gz"):
        try:
            content = gzip.decompress(content)
        except (OSError, EOFError, zlib.error) as exc:
            parsed.quarantined.add(0, Reason.UNREADABLE_FILE, f"{type(exc).__name__}: {exc}")
            return parsed
    if is_parquet(path):
        _read_parquet(content, num_partitions, parsed)
    else:
        _read_json_lines(content, num_partitions, parsed, keep_values)
    return parsed


class _Invalid(Exception):
    def __init__(self, reason: str):
        self.reason = reason


def _is_int(x: Any) -> bool:
    # bool is an int subclass in Python; JSON true is not a timestamp.
    return isinstance(x, int) and not isinstance(x, bool)


def _validate(fields: dict, num_partitions: int) -> tuple[str, Any, int, int, int | None]:
    """(key, value, timestamp, partition, offset) of a valid record, or raise _Invalid(reason)."""
    key = fields.get("key")
    if key is None:
        raise _Invalid(Reason.MISSING_KEY)
    if not isinstance(key, str):
        raise _Invalid(Reason.ILL_TYPED_KEY)
    timestamp = fields.get("timestamp")
    if timestamp is None:
        raise _Invalid(Reason.MISSING_TIMESTAMP)
    if not _is_int(timestamp) or timestamp > INT64_MAX:
        raise _Invalid(Reason.ILL_TYPED_TIMESTAMP)
    if timestamp < 0:
        raise _Invalid(Reason.NEGATIVE_TIMESTAMP)
    partition = fields.get("partition")
    if partition is None:
        partition = partition_for_key(key, num_partitions)
    elif not _is_int(partition):
        raise _Invalid(Reason.ILL_TYPED_PARTITION)
    elif not 0 <= partition < num_partitions:
        raise _Invalid(Reason.PARTITION_OUT_OF_RANGE)
    offset = fields.get("offset")
    if offset is not None and (not _is_int(offset) or not 0 <= offset <= INT64_MAX):
        raise _Invalid(Reason.ILL_TYPED_OFFSET)
    return key, fields.get("value"), timestamp, partition, offset


def _accept(parsed: LandingFile, line: int, fields: dict, num_partitions: int) -> str | None:
    """Add a valid record to its partition; return the quarantine reason of an invalid one."""
    try:
        key, value, timestamp, partition, offset = _validate(fields, num_partitions)
    except _Invalid as bad:
        return bad.reason
    records = parsed.by_partition.get(partition)
    if records is None:
        records = parsed.by_partition[partition] = PartitionRecords()
    records.keys.append(key)
    records.values.append(value)
    records.timestamps.append(timestamp)
    records.offsets.append(offset)
    records.lines.append(line)
    return None


def _read_json_lines(content: bytes, num_partitions: int, parsed: LandingFile, keep_values: bool) -> None:
    if not _read_clean_json_lines(content, num_partitions, parsed, keep_values):
        _read_json_lines_one_by_one(content, num_partitions, parsed)


_RECORD_FIELDS = frozenset(("key", "value", "timestamp"))


class _CleanLine(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """What a clean line is: a string key, an integer timestamp, any JSON value (kept as text here). Not
    tracked by the garbage collector (`gc=False`): its fields (str, int, Raw) cannot form a cycle, so the
    collector need not scan it."""

    key: str
    timestamp: int
    value: msgspec.Raw = msgspec.Raw(b"null")


# A whole file's lines as the items of one JSON array: one decoder call, no bytes object per line.
_decode_clean_lines = msgspec.json.Decoder(list[_CleanLine]).decode


# Bytes of a file the bulk path decodes at a time (then the next line ends its piece): a piece's copies and
# decoded lines, not a whole file's, are what a worker holds beside the file while it parses.
CLEAN_PIECE_BYTES = 2**20


def _read_clean_json_lines(
    content: bytes, num_partitions: int, parsed: LandingFile, keep_values: bool
) -> bool:
    """The common case in bulk: every line is a valid record with only key/value/timestamp. The lines are
    decoded, a piece of the file at a time (`CLEAN_PIECE_BYTES`), as the items of one JSON array (values
    stay JSON text), while range checks, partitioning and grouping run over whole columns. Returns False,
    having changed nothing, as soon as any line needs a closer look (the line-by-line path then finds out
    which and why)."""
    end = len(content) - 1 if content.endswith(b"\n") else len(content)
    if not end:
        return False
    keys: list[str] = []
    values: list = []
    timestamps: list[np.ndarray] = []
    start = 0
    while start < end:
        stop = content.find(b"\n", min(start + CLEAN_PIECE_BYTES, end), end)
        stop = end if stop < 0 else stop
        try:
            # Fails on bad JSON, a non-object, a missing, extra or ill-typed field, on invalid UTF-8 in the
            # key (values are only syntax-checked here), and on a blank line (two commas in a row, or an
            # empty piece). A line holding two comma-separated objects would still parse: the counts catch it.
            records = _decode_clean_lines(_as_json_array(content, start, stop))
            if len(records) != content.count(b"\n", start, stop) + 1:
                return False
            # OverflowError: a timestamp beyond int64 (the line path quarantines it)
            timestamps.append(np.fromiter(map(_TIMESTAMP, records), dtype=np.int64, count=len(records)))
        except (*_JSON_ERRORS, OverflowError):
            return False
        keys += map(_KEY, records)
        piece_values = list(map(_VALUE, records))
        del records
        # The task must never meet a value it cannot decode: make sure now, by a scan or else by decoding.
        if not _surely_decodable(b",".join(piece_values)):
            try:
                decode_json_values(piece_values)
            except _JSON_ERRORS:
                return False
        if keep_values:
            values += piece_values
        start = stop + 1
    # A blank last line of the text ends no piece: the whole text's count catches it.
    if len(keys) != content.count(b"\n", 0, end) + 1:
        return False
    all_timestamps = np.concatenate(timestamps)
    if all_timestamps.min() < 0:
        return False
    _group_by_partition(
        parsed,
        pa.array(keys, pa.string()),
        values if keep_values else None,
        all_timestamps,
        num_partitions,
        json_values=True,
    )
    return True


_KEY, _TIMESTAMP, _VALUE = attrgetter("key"), attrgetter("timestamp"), attrgetter("value")


def _as_json_array(content: bytes, start: int, stop: int) -> bytes:
    """The lines of `content[start:stop]` as the items of one JSON array: `[`, the lines joined by commas,
    `]`."""
    return b"".join((b"[", content[start:stop].replace(b"\n", b","), b"]"))


def _group_by_partition(
    parsed: LandingFile,
    keys: pa.StringArray,
    values: list,
    timestamps: np.ndarray,
    num_partitions: int,
    json_values: bool = False,
) -> None:
    """Valid records (no partition or offset fields) of a whole file into their partitions, by columns:
    one stable sort by partition, then each column is picked in that order once and cut into slices
    (timestamps, lines and key codes as arrays, values as lists; `values` None: not kept)."""
    partitions, codes, tables = _number_keys(keys, num_partitions)
    counts = np.bincount(partitions, minlength=num_partitions).tolist()
    order = np.argsort(partitions, kind="stable")
    timestamps, codes = timestamps[order], codes[order]
    if values is not None:
        values = gather(values, order)
    lines = order + 1
    start = 0
    for partition, count in enumerate(counts):
        if not count:
            continue
        end = start + count
        kept = values[start:end] if values is not None else None
        parsed.by_partition[partition] = PartitionRecords(
            values=None if json_values else kept,
            timestamps=timestamps[start:end],
            lines=lines[start:end],
            values_json=kept if json_values else None,
            key_table=tables[partition],
            key_codes=codes[start:end],
            values_kept=values is not None,
        )
        start = end


def _number_keys(keys: pa.StringArray, num_partitions: int) -> tuple[np.ndarray, np.ndarray, list[list]]:
    """Per record, its key's partition and its key's code in that partition's table; per partition, the
    table: its distinct keys by first appearance. A table per partition, not one per file: a chunk then
    carries no key of another partition (with many keys, the file's table in every chunk made each task
    decode every partition's keys)."""
    # Arrow numbers the distinct keys by first appearance (hashing each record's key in C), and hands
    # over the distinct keys' UTF-8 bytes for their partitions.
    encoded = keys.dictionary_encode()
    key_of_record = encoded.indices.to_numpy()
    distinct = encoded.dictionary
    partition_of_key = (crc32_of_strings(distinct) % num_partitions).astype(np.int32)
    # The distinct keys grouped by partition, each group in order of first appearance: a key's code is its
    # place in its group.
    grouped = np.argsort(partition_of_key, kind="stable")
    sizes = np.bincount(partition_of_key, minlength=num_partitions)
    code_of_key = np.empty(len(distinct), dtype=np.int32)
    code_of_key[grouped] = np.arange(len(distinct)) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    in_groups = distinct.take(grouped).to_pylist()
    ends = np.cumsum(sizes).tolist()
    tables = [in_groups[end - size : end] for end, size in zip(ends, sizes.tolist(), strict=True)]
    return partition_of_key[key_of_record], code_of_key[key_of_record], tables


def _read_json_lines_one_by_one(content: bytes, num_partitions: int, parsed: LandingFile) -> None:
    # Split bytes, not text: one bad byte sequence must cost one line, not the file.
    for number, raw in enumerate(content.split(b"\n"), start=1):
        if not raw.strip():
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            parsed.quarantined.add(
                number, Reason.INVALID_UTF8, raw.decode("utf-8", errors="backslashreplace")
            )
            continue
        text = text.rstrip("\r")
        try:
            fields = decode_json(text)
        except _JSON_ERRORS:
            parsed.quarantined.add(number, Reason.UNPARSEABLE, text)
            continue
        if not isinstance(fields, dict):
            parsed.quarantined.add(number, Reason.NOT_AN_OBJECT, text)
            continue
        reason = _accept(parsed, number, fields, num_partitions)
        if reason is not None:
            parsed.quarantined.add(number, reason, text)


def _json_default(x: Any) -> Any:
    # Parquet values may be dates, decimals or bytes; the raw text of a quarantined row only needs to be readable.
    if isinstance(x, bytes):
        return x.decode("utf-8", errors="backslashreplace")
    return str(x)


def _read_parquet(content: bytes, num_partitions: int, parsed: LandingFile) -> None:
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(io.BytesIO(content))
    except (pa.ArrowException, OSError, ValueError) as exc:
        parsed.quarantined.add(0, Reason.UNREADABLE_FILE, f"{type(exc).__name__}: {exc}")
        return
    if _read_clean_parquet(table, num_partitions, parsed):
        return
    # Row by row: a wrongly typed column makes every row ill-typed (values keep their Python types).
    rows = table.to_pylist()
    for number, fields in enumerate(rows, start=1):
        reason = _accept(parsed, number, fields, num_partitions)
        if reason is not None:
            parsed.quarantined.add(number, reason, json.dumps(fields, default=_json_default, sort_keys=True))


def _read_clean_parquet(table, num_partitions: int, parsed: LandingFile) -> bool:
    """The common case by columns: string keys and non-negative integer timestamps without nulls, no
    partition or offset column. Returns False, having changed nothing, when rows need a closer look."""
    import pyarrow.compute as pc

    names = set(table.column_names)
    if not {"key", "timestamp"} <= names or not names <= _RECORD_FIELDS or table.num_rows == 0:
        return False
    key, timestamp = table.column("key"), table.column("timestamp")
    if not (pa.types.is_string(key.type) or pa.types.is_large_string(key.type)):
        return False
    if not pa.types.is_integer(timestamp.type) or key.null_count or timestamp.null_count:
        return False
    low, high = pc.min_max(timestamp).values()
    if low.as_py() < 0 or high.as_py() > INT64_MAX:
        return False
    keys = key.combine_chunks().cast(pa.string())  # Arrow already: no Python string per row
    timestamps = timestamp.to_numpy().astype(np.int64)
    values = table.column("value").to_pylist() if "value" in names else [None] * table.num_rows
    _group_by_partition(parsed, keys, values, timestamps, num_partitions)
    return True
