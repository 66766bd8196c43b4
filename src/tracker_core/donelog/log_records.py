"""The done log's entries as records (what export writes, one JSON object a line), and the item
filter readers skip entries with (tracker_core.donelog.log_archive)."""

from __future__ import annotations

import json

import orjson


def _int(value):
    try:
        return int(value)
    except (TypeError, ValueError):
        return value


def _json_value(text):
    """The done's id, stored as JSON text: its value, or the text itself when it is not JSON."""
    try:
        return orjson.loads(text)
    except (orjson.JSONDecodeError, TypeError):
        return text


def _names(text: str) -> list[str]:
    return text.split("\0") if text else []


def record(kind: str, entry_id: str, fields: dict) -> dict:
    """Entry ENTRY_ID of a KIND stream as the record export writes (one JSON object a line)."""
    fields = dict(fields)
    out = {"entry": entry_id, "at": _int(fields.pop("at", None))}
    if kind == "done":
        pairs = _names(fields.pop("domains", ""))
        out.update(
            downloader=fields.pop("downloader", None),
            ip=fields.pop("ip", None),
            items=_names(fields.pop("items", "")),
            bytes=_int(fields.pop("bytes", 0)),
            domains={d: _int(n) for d, n in zip(pairs[::2], pairs[1::2])},
            version=fields.pop("version", ""),
            id=_json_value(fields.pop("id", "null")),
        )
    elif kind == "bad_dones":
        out.update(
            downloader=fields.pop("downloader", None),
            reason=fields.pop("reason", None),
            count=_int(fields.pop("count", 0)),
            items=_names(fields.pop("items", "")),
        )
    out.update(fields)  # what a later version adds, kept as text
    return out


def encode(rec: dict) -> bytes:
    """REC as one JSON line (no newline); names that are not UTF-8 are kept as \\u escapes."""
    try:
        return orjson.dumps(rec)
    except TypeError:  # lone surrogates (surrogateescape'd bytes) orjson will not write
        return json.dumps(rec, ensure_ascii=True, separators=(",", ":")).encode()


def decode(line: bytes) -> dict:
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        return json.loads(line)


class Wanted:
    """The item filter: entries that name one of NAMES. Exact on decoded records; before that,
    byte and substring tests let a reader skip, at C speed, what cannot name one (a whole
    segment file, a line, a stream entry) without decoding it."""

    def __init__(self, names):
        self.names = frozenset(names)
        needles = set()
        for name in self.names:
            # A line is orjson's, or json's ASCII-only fallback when a name in it is not UTF-8
            # (encode): the name is in the line in one of the two spellings, quotes included.
            try:
                needles.add(orjson.dumps(name))
            except TypeError:
                pass
            needles.add(json.dumps(name, ensure_ascii=True).encode())
        self.needles = tuple(needles)

    def may_name(self, data: bytes) -> bool:
        return any(needle in data for needle in self.needles)

    def may_name_text(self, text: str) -> bool:
        return any(name in text for name in self.names)

    def named(self, kind: str, rec: dict) -> list[str]:
        """The names of the filter REC names."""
        if kind == "uploads":
            return [rec["item"]] if rec.get("item") in self.names else []
        return [name for name in rec.get("items", ()) if name in self.names]
