"""``POST /backfeed/legacy/PROJECT-SECRET``: items discovered by workers, deduplicated.

Answers 200 ``{"status_code": 200, "data": "N items queued for deduplication"}``. Every refusal
is a 4xx with a JSON ``status_code`` and a one-line ``reason``, is counted, and changes nothing.
Entries that cannot be items (empty, longer than a name may be, not valid UTF-8, holding a NUL,
or with an empty dedup key) are refused one by one and counted by reason; the rest of the post is
taken and the answer's ``data`` says how many were refused (a 400 would make the grab script
retry and then fail the item it was working on). Only whole-post bounds (body size, entries per
post) refuse the post.
When the project's backfeed bound is reached, Redis is nearly full (TRACKER_MEMORY_GUARD_PERCENT
of its maxmemory, 90 by default: a full Redis would refuse every project's claims and dones),
or Redis cannot take the change, the answer is a JSON 503 (grab scripts check ``status_code`` and retry with back-off; any answer they cannot
decode as JSON would stop them).
"""

from __future__ import annotations

import re
from urllib.parse import unquote_to_bytes

from tracker_api.warrior_api import protocol_shapes
from tracker_api.web.api_spec import STR, TEXT_PLAIN, declare
from tracker_core.infra.rawredis import RedisError
from tracker_core.items import bloom
from tracker_core.items.backfeed import Backfeed, BadBatch, parse_body
from tracker_core.scripts import ScriptError

MAX_BODY_BYTES = 4 * 1024 * 1024
SHARD_RE = re.compile(r"[A-Za-z0-9_.:-]{1,64}\Z")
SECRET_RE = re.compile(r"[A-Za-z0-9]{8,128}\Z")
RETRY_AFTER_S = 60


class _Refusal(Exception):
    def __init__(self, status: int, reason: str, field: str | None, project: str | None = None):
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

    @declare(
        "Queue discovered items (NAME is PROJECT-SECRET)",
        body=STR,
        body_types=(TEXT_PLAIN, "application/octet-stream"),
        query=protocol_shapes.BACKFEED_QUERY,
        answers=protocol_shapes.BACKFEED_ANSWERS,
        refuses=(400, 403, 413),
    )
    def on_post(self, req, resp, name: str):
        try:
            received, refused = self._handle(req, name)
        except (RedisError, ScriptError):
            # Nothing acknowledged; a retry is safe (seen items are dropped). JSON, as grab
            # scripts decode every answer; the reason stays in the server's log, not here.
            self._refuse(resp, _Refusal(503, "tracker storage unavailable, retry later", None))
            return
        except _Refusal as refusal:
            self._refuse(resp, refusal)
            return
        data = f"{received} items queued for deduplication"
        if refused:
            data += "; refused: " + ", ".join(f"{n} {reason}" for reason, n in refused.items())
        resp.media = {"status_code": 200, "data": data}

    def _refuse(self, resp, refusal: _Refusal) -> None:
        resp.status = refusal.status
        resp.media = {"status_code": refusal.status, "reason": refusal.reason}
        if refusal.status == 503:
            resp.set_header("Retry-After", str(RETRY_AFTER_S))
        if refusal.field is None:
            return
        try:
            self.engine.count(refusal.project, refusal.field)
        except RedisError:
            pass  # counting must never turn a 4xx into a 5xx

    def _handle(self, req, name: str) -> tuple[int, dict]:
        """Queue the post; return (entries taken, {reason: entries refused})."""
        project, _, secret = name.rpartition("-")
        if not project or not SECRET_RE.match(secret):
            raise _Refusal(403, "unknown project or wrong secret", "backfeed_refused")
        if self.engine.settings(project) is None:
            raise _Refusal(404, "unknown project or wrong secret", "backfeed_refused")
        delimiter = _param_bytes(req, "delimiter", b"\0", project) or b"\0"  # never empty
        separator = _param_bytes(req, "itemseparator", None, project)
        if separator is not None and separator == delimiter:
            raise _Refusal(400, "itemseparator must differ from delimiter", "backfeed_bad_params", project)
        if separator is not None and self.engine.layout(project).sharded:
            # An item's shard is picked from its whole name, so two entries of one dedup key could
            # land on two shards' filters: refused rather than deduplicated inexactly.
            raise _Refusal(
                400, "itemseparator is not supported on a sharded project", "backfeed_bad_params", project
            )
        shard = req.get_param("shard") or ""
        if shard and not SHARD_RE.match(shard):
            raise _Refusal(400, "shard must match [A-Za-z0-9_.:-]{1,64}", "backfeed_bad_params", project)
        if req.content_length is not None and req.content_length > MAX_BODY_BYTES:
            raise _Refusal(413, f"body larger than {MAX_BODY_BYTES} bytes", "backfeed_too_large", project)
        body = req.bounded_stream.read(MAX_BODY_BYTES + 1)
        if len(body) > MAX_BODY_BYTES:
            raise _Refusal(413, f"body larger than {MAX_BODY_BYTES} bytes", "backfeed_too_large", project)
        try:
            entries, dedup_keys, refused = parse_body(body, delimiter, separator)
        except BadBatch as exc:
            raise _Refusal(400, str(exc), "backfeed_bad_body", project) from None
        if entries and self.engine.memory_nearly_full():
            raise _Refusal(503, "tracker memory nearly full, retry later", "backfeed_refused_memory", project)
        outcome = self.backfeed.submit(project, secret, entries, dedup_keys, shard)
        if outcome.status == bloom.WRONG_SECRET:
            raise _Refusal(403, "unknown project or wrong secret", "backfeed_refused", project)
        if outcome.status == bloom.UNKNOWN_PROJECT:
            raise _Refusal(404, "unknown project or wrong secret", "backfeed_refused")
        if refused:  # counted once the secret is known to be right
            self.backfeed.count_refused(project, refused)
        if outcome.status == bloom.FULL:
            raise _Refusal(
                503,
                f"backfeed queue full ({outcome.bound} items), retry later",
                "backfeed_refused_full",
                project,
            )
        return outcome.received, refused
