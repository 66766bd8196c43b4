"""How a command prints: a readable table, or JSON with --json (or TRACKER_JSON=1)."""

from __future__ import annotations

import json

import click

JSON_FLAG = "tracker.json"


def _remember_json(ctx: click.Context, _param, value: bool) -> None:
    if value:
        ctx.meta[JSON_FLAG] = True  # meta is shared by the whole command chain


def json_param() -> click.Option:
    """--json, which every printing command takes (root.Command adds it)."""
    return click.Option(
        ["--json"],
        is_flag=True,
        expose_value=False,
        callback=_remember_json,
        help="Print JSON instead of a table (JSON lines where the output is a stream).",
    )


def wants_json() -> bool:
    return bool(click.get_current_context().meta.get(JSON_FLAG))


def emit(data, text: str | None = None) -> None:
    """Print DATA: as one JSON document with --json, else TEXT if given, else as a table."""
    if wants_json():
        click.echo(json.dumps(data, sort_keys=True))
    else:
        click.echo(table(data) if text is None else text)


def emit_rows(rows, text=None) -> None:
    """Print one row of a stream: a JSON line with --json, else TEXT(row) or a key=value line."""
    for row in rows:
        if wants_json():
            click.echo(json.dumps(row, sort_keys=True))
        else:
            click.echo(text(row) if text else "  ".join(f"{k}={cell(v)}" for k, v in row.items()))


def printable(text: str) -> str:
    """TEXT for one table cell: control characters escaped, so an item name cannot break a table."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def cell(value) -> str:
    if value is None:
        return "-"
    if value == "":
        return '""'  # an empty setting, told apart from a missing one
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (list, tuple)) and all(not isinstance(v, (dict, list)) for v in value):
        return ", ".join(cell(v) for v in value) or "-"
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, sort_keys=True) if value else "-"
    return printable(str(value))


def columns(rows: list[dict], headers: list[str] | None = None) -> str:
    """ROWS as aligned columns under upper-case headers (the last column is not padded)."""
    if headers is None:
        headers = list(dict.fromkeys(k for row in rows for k in row))
    lines = [[h.upper() for h in headers]] + [[cell(row.get(h)) for h in headers] for row in rows]
    widths = [max(len(line[i]) for line in lines) for i in range(len(headers))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(line[:-1], widths)) + ("  " if len(line) > 1 else "") + line[-1]
        for line in lines
    )


def _flat(data: dict, prefix: str = "") -> tuple[list[tuple[str, str]], list[tuple[str, list]]]:
    pairs, tables = [], []
    for key in sorted(data):
        value, name = data[key], f"{prefix}{key}"
        if isinstance(value, dict) and value:
            more, subtables = _flat(value, f"{name}.")
            pairs += more
            tables += subtables
        elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            tables.append((name, value))
        else:
            pairs.append((name, cell(value)))
    return pairs, tables


def table(data) -> str:
    """A readable rendering of any JSON-able answer: nested keys as dotted names beside their
    values, lists of records as column tables under their name."""
    if isinstance(data, list):
        if data and all(isinstance(v, dict) for v in data):
            return columns(data)
        return "\n".join(cell(v) for v in data)
    if not isinstance(data, dict):
        return cell(data)
    if len(data) == 1 and isinstance(next(iter(data.values())), list):
        return table(next(iter(data.values())))  # {"items": [...]}: the list is the answer
    pairs, tables = _flat(data)
    width = max((len(k) for k, _ in pairs), default=0)
    parts = ["\n".join(f"{k.ljust(width)}  {v}" for k, v in pairs)] if pairs else []
    parts += [f"{name}:\n{columns(rows)}" for name, rows in tables]
    return "\n\n".join(parts) if parts else "-"
