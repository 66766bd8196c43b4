"""``POST /backfeed/legacy/PROJECT-SECRET``: items discovered by workers, deduplicated.

Answers 200 ``{"status_code": 200, "data": "N items queued for deduplication"}``. Every refusal
is a 4xx with a JSON ``status_code`` and a one-line ``reason``, is counted, and changes nothing.
"""
from __future__ import annotations

import re
from urllib.parse import unquote_to_bytes

from tracker_core import bloom
from tracker_core.backfeed import Backfeed, BadBatch, split_body
from tracker_core.rawredis import RedisError

MAX_BODY_BYTES = 4 * 1024 * 1024
SHARD_RE = re.compile(r"[A-Za-z0-9_.:-]{1,64}\Z")
SECRET_RE = re.compile(r"[A-Za-z0-9]{8,128}\Z")


class _Refusal(Exception):
    def __init__(self, status: int, reason: str, field: str, project: str | None = None):
        super().__init__(reason)
        self.status, self.reason, self.field, self.project = status, reason, field, project


def _param_bytes(req, name: str, default: bytes | None, project: str) -> bytes | None:
    """Query parameter NAME as the bytes the client percent-encoded (`%00`, `%1F`, even `%FF`).

    Read from the raw query string: the framework decodes parameters as UTF-8, which would turn a
    byte like `%FF` into U+FFFD and the body would silently not be split.
    """
    raw = None
    for pair in req.query_string.split("&"):
        key, _, value = pair.partition("=")
        if unquote_to_bytes(key.replace("+", " ")) == name.encode():
            raw = unquote_to_bytes(value.replace("+", " "))
            break
    if raw is None:
        return default
    if not 1 <= len(raw) <= 16:
        raise _Refusal(400, f"{name} must be 1 to 16 bytes", "backfeed_bad_params", project)
    return raw


class BackfeedResource:
    def __init__(self, engine):
        self.engine = engine
        self.backfeed = Backfeed(engine)

    def on_post(self, req, resp, name: str):
        try:
            received = self._handle(req, name)
        except _Refusal as refusal:
            resp.status = refusal.status
            resp.media = {"status_code": refusal.status, "reason": refusal.reason}
            try:
                self.engine.count(refusal.project, refusal.field)
            except RedisError:
                pass  # counting must never turn a 4xx into a 5xx
            return
        resp.media = {"status_code": 200, "data": f"{received} items queued for deduplication"}

    def _handle(self, req, name: str) -> int:
        project, _, secret = name.rpartition("-")
        if not project or not SECRET_RE.match(secret):
            raise _Refusal(403, "unknown project or wrong secret", "backfeed_refused")
        if self.engine.settings(project) is None:
            raise _Refusal(404, "unknown project or wrong secret", "backfeed_refused")
        delimiter = _param_bytes(req, "delimiter", b"\0", project)
        separator = _param_bytes(req, "itemseparator", None, project)
        if separator is not None and separator == delimiter:
            raise _Refusal(400, "itemseparator must differ from delimiter", "backfeed_bad_params",
                           project)
        shard = req.get_param("shard") or ""
        if shard and not SHARD_RE.match(shard):
            raise _Refusal(400, "shard must match [A-Za-z0-9_.:-]{1,64}", "backfeed_bad_params",
                           project)
        if req.content_length is not None and req.content_length > MAX_BODY_BYTES:
            raise _Refusal(413, f"body larger than {MAX_BODY_BYTES} bytes", "backfeed_too_large",
                           project)
        body = req.bounded_stream.read(MAX_BODY_BYTES + 1)
        if len(body) > MAX_BODY_BYTES:
            raise _Refusal(413, f"body larger than {MAX_BODY_BYTES} bytes", "backfeed_too_large",
                           project)
        try:
            entries, dedup_keys = split_body(body, delimiter, separator)
        except BadBatch as exc:
            raise _Refusal(400, str(exc), "backfeed_bad_body", project) from None
        outcome = self.backfeed.submit(project, secret, entries, dedup_keys, shard)
        if outcome.status == bloom.WRONG_SECRET:
            raise _Refusal(403, "unknown project or wrong secret", "backfeed_refused", project)
        if outcome.status == bloom.UNKNOWN_PROJECT:
            raise _Refusal(404, "unknown project or wrong secret", "backfeed_refused")
        return outcome.received
