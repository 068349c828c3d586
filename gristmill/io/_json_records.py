"""JSON records to rows, shared by the JSON lines and JSON array readers: exact parsing (integers beyond
64 bits, lone surrogates) and the per-record checks that turn a bad record into a reject."""
from __future__ import annotations

import json
import re
from typing import Iterator

import orjson
import pyarrow as pa

from ..core import columns as C
from ..core.accounting import Reject
from ._common import READ, slices
from .base import ReadOptions, Shard, with_ids

JSON_KINDS = {dict: "object", list: "array", str: "string", bool: "boolean", int: "number", float: "number",
              type(None): "null"}
LONE_SURROGATE = "lone_surrogates"


class BadRecord(Exception):
    """A JSON record that cannot become a row: (error type, message)."""


def becomes_row(rec, key: str, text_optional: bool) -> bool:
    """Whether a parsed JSON record becomes a row (else it is a reject, see :func:`record_rows`): an object whose
    text is a string, or, with ``text_optional``, missing or null."""
    if type(rec) is not dict:
        return False
    text = rec.get(key)
    return type(text) is str or (text is None and text_optional)


def record_rows(records: list, positions: list, shard: Shard, opts: ReadOptions,
                line_of=None) -> Iterator[pa.RecordBatch | Reject]:
    """Rows from parsed JSON records, decided per record and never by what else is in the batch: a
    record that is not an object, or whose text is not a string, is a reject naming its line (JSON
    lines) or item (JSON arrays); a missing or null text is a reject unless ``text_optional``. The rest
    become one batch (see ``columns.from_records`` for how fields are held) with ids from ``positions``."""
    key = opts.text_key
    keep = []
    for rec, p in zip(records, positions):
        if becomes_row(rec, key, opts.text_optional):  # (a missing text: a declared op builds it)
            keep.append(True)
            continue
        keep.append(False)
        text = rec.get(key) if type(rec) is dict else None
        where = {"source": shard.source, "offset": int(p), "line": line_of(p) if line_of else None}
        if type(rec) is not dict:
            yield Reject(READ, "WrongFieldType", f"{_where(p, line_of)} is a JSON {JSON_KINDS.get(type(rec))}, "
                         f"expected an object", row={"raw": C.dumps(rec).decode()[:2000]}, **where)
        elif text is not None:
            yield Reject(READ, "WrongFieldType", f"text field {key!r} is a JSON {JSON_KINDS.get(type(text))}, "
                         f"expected a string ({_where(p, line_of)})", row=rec, **where)
        else:
            yield Reject(READ, "MissingField", f"text field {key!r} is missing or null", **where)
    if not all(keep):
        records = [r for r, k in zip(records, keep) if k]
        positions = [p for p, k in zip(positions, keep) if k]
    if records:
        batch = C.from_records(records, strings=(key,))
        yield from slices(with_ids(batch, shard, positions, opts), opts.batch_size)


def _where(p, line_of) -> str:
    return f"line {line_of(p)}" if line_of else f"item {p}"


def load_record(line: bytes, opts: ReadOptions, long_digits: bool | None = None):
    """One JSON value, exactly: orjson, or Python's parser for what orjson would round (integers beyond
    64 bits, where ``line`` has ``long_digits``: looked for when not given) or refuse (lone surrogates,
    which are rejected or, with ``lone_surrogates: replace``, become U+FFFD). Raises BadRecord."""
    if long_digits is None:
        long_digits = C.LONG_RUN in C.digit_runs(line)
    if not long_digits:
        try:
            return orjson.loads(line)
        except orjson.JSONDecodeError as e:
            if "surrogate" not in str(e):
                try:
                    line.decode("utf-8")
                except UnicodeDecodeError as ue:
                    raise BadRecord("UnicodeDecodeError", f"invalid UTF-8: {ue}") from None
                raise BadRecord("JSONDecodeError", str(e)) from None
    try:
        value = json.loads(line.decode("utf-8"), parse_constant=_no_constant)
    except UnicodeDecodeError as e:
        raise BadRecord("UnicodeDecodeError", f"invalid UTF-8: {e}") from None
    except ValueError as e:
        raise BadRecord("JSONDecodeError", str(e)) from None
    return fix_surrogates(value, opts.param(LONE_SURROGATE, "reject"))


def _no_constant(name):
    raise ValueError(f"{name} is not valid JSON")


_SURROGATE = re.compile("[\ud800-\udfff]")


def fix_surrogates(value, mode: str):
    """``value`` with every lone UTF-16 surrogate (valid in JSON's ``\\uXXXX`` escapes, not in Unicode)
    replaced by U+FFFD when ``mode`` is 'replace'; BadRecord when 'reject'."""
    if isinstance(value, str):
        if not _SURROGATE.search(value):
            return value
        if mode != "replace":
            raise BadRecord("LoneSurrogate", "a string holds a lone UTF-16 surrogate escape (e.g. \\ud800), which "
                            "is not valid Unicode; reader option lone_surrogates: replace turns it into U+FFFD")
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {fix_surrogates(k, mode): fix_surrogates(v, mode) for k, v in value.items()}
    if isinstance(value, list):
        return [fix_surrogates(v, mode) for v in value]
    return value

