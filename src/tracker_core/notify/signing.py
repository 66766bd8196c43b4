"""A delivery's POST: its JSON body, its headers and its HMAC-SHA256 signature.

The body is the event (id, event, project, occurred_ms, data) plus, for this attempt,
``attempt`` and ``sent_ms``: the signature over the raw body covers the time it was sent, so a
receiver that checks the signature can trust ``sent_ms`` and refuse a replayed old delivery,
and dedupe by ``id`` (a delivery whose answer was lost is sent again, with the same id).
docs/operations.md ("Webhooks") shows a receiver's check in Python.
"""

from __future__ import annotations

import hashlib
import hmac
import json

SIGNATURE_HEADER = "X-Tracker-Signature"
EVENT_ID_HEADER = "X-Tracker-Event-Id"
EVENT_HEADER = "X-Tracker-Event"
TIMESTAMP_HEADER = "X-Tracker-Timestamp"  # sent_ms / 1000, whole seconds: also inside the body


def body(event: dict, attempt: int, sent_ms: int) -> bytes:
    """The raw body of one attempt at delivering EVENT."""
    return json.dumps({**event, "attempt": attempt, "sent_ms": sent_ms}, sort_keys=True).encode()


def signature(secret: str, raw: bytes) -> str:
    """The signature header's value: sha256= and the HMAC-SHA256 of RAW under SECRET, in hex."""
    return "sha256=" + hmac.new(secret.encode(), raw, hashlib.sha256).hexdigest()


def headers(secret: str, event: dict, raw: bytes, sent_ms: int, user_agent: str) -> dict[str, str]:
    return {
        "Content-Type": "application/json",
        "User-Agent": user_agent,
        EVENT_HEADER: event["event"],
        EVENT_ID_HEADER: event["id"],
        TIMESTAMP_HEADER: str(sent_ms // 1000),
        SIGNATURE_HEADER: signature(secret, raw),
    }


def verify(secret: str, raw: bytes, header: str | None) -> bool:
    """Whether HEADER is RAW's signature under SECRET (what a receiver checks; the tests too)."""
    return header is not None and hmac.compare_digest(signature(secret, raw), header)
