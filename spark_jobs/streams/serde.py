"""Serialized forms the semantics depend on: suppress buffer order and buffer byte sizes.

Kafka orders a suppress buffer by the serialized key and sizes it by serialized values. The engine keeps
Python objects, so these functions define the serialization that docs/semantics.md section 5 refers to:

- keys: str as UTF-8, int as 8-byte big-endian two's complement, bytes as is, None as empty,
  float as 8-byte IEEE big-endian, bool as one byte, windowed keys as key bytes then the window start
  (8 bytes); anything else as compact JSON (or its repr when JSON cannot encode it).
- values: the same rules, so an int (Kafka's Long) is 8 bytes and None (null) is 0 bytes.
"""

from __future__ import annotations

import json
import struct
from typing import Any

from .records import Windowed

_pack_double = struct.Struct(">d").pack


def key_bytes(key: Any) -> bytes:
    """The serialized key; windowed keys append the window start."""
    if type(key) is Windowed:
        inner = key[0]  # a string mostly: encoded here, which saves two calls per buffered window
        return (inner.encode() if type(inner) is str else key_bytes(inner)) + window_start_bytes(key[1][0])
    return _to_bytes(key)


def window_start_bytes(start: int) -> bytes:
    """The suffix a window's start adds to the bytes of its windowed keys."""
    return _int_bytes(start)


def _int_bytes(value: int) -> bytes:
    try:
        return value.to_bytes(8, "big", signed=True)
    except OverflowError:  # beyond int64: no Kafka serde exists, fall back to the decimal text
        return str(value).encode()


def _to_bytes(value: Any) -> bytes:
    t = type(value)
    if t is str:
        return value.encode()
    if t is int:
        return _int_bytes(value)
    if value is None:
        return b""
    if t is bytes:
        return value
    if t is bool:
        return b"\x01" if value else b"\x00"
    if t is float:
        return _pack_double(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, Windowed):
        return key_bytes(value)
    try:
        return json.dumps(value, separators=(",", ":"), sort_keys=True, default=repr).encode()
    except (TypeError, ValueError):
        return repr(value).encode()


def value_size(value: Any) -> int:
    """Length in bytes of the serialized value (0 for None)."""
    t = type(value)
    if t is int or t is float:
        return 8
    if t is str:
        return len(value) if value.isascii() else len(value.encode())
    if value is None:
        return 0
    return len(_to_bytes(value))


def headers_size(headers: Any) -> int:
    """Kafka's estimate for headers: each header key's length plus its value's byte length."""
    if not headers:
        return 0
    items = headers.items() if isinstance(headers, dict) else headers
    total = 0
    for hkey, hvalue in items:
        total += len(hkey)
        if hvalue is not None:
            total += len(hvalue) if isinstance(hvalue, (bytes, bytearray)) else len(_to_bytes(hvalue))
    return total
