"""Per-project backfeed secrets: created, listed and revoked by admins, stored only as hashes.

A grab script carries its project's secret in the backfeed URL. Redis keeps the SHA-256 of each
secret (hex) mapped to a small record, so a dump of Redis or a log line never reveals one; the
hot path hashes what it was given and the backfeed script checks it in the same round trip.
"""
from __future__ import annotations

import hashlib
import json
import secrets
import time

SECRET_BYTES = 16


def digest(secret: str | bytes) -> str:
    """Hash SECRET the way it is stored."""
    raw = secret.encode("utf-8", "surrogateescape") if isinstance(secret, str) else secret
    return hashlib.sha256(raw).hexdigest()


def create(r, keys) -> tuple[str, str]:
    """Make a new secret for the project of KEYS; return (id, secret). Only the hash is stored."""
    secret = secrets.token_hex(SECRET_BYTES)   # hex: never contains the '-' that ends the project
    hashed = digest(secret)
    record = json.dumps({"id": hashed[:12], "created": int(time.time())})
    r.hset(keys.backfeed_secrets, hashed, record)
    return hashed[:12], secret


def list_secrets(r, keys) -> list[dict]:
    """Records (id, created) of the project's secrets; the secrets themselves are not kept."""
    return sorted((json.loads(v) for v in r.hvals(keys.backfeed_secrets)),
                  key=lambda rec: (rec["created"], rec["id"]))


def revoke(r, keys, secret_id: str) -> bool:
    """Revoke the secret whose id is SECRET_ID; False when there is none."""
    if len(secret_id) < 6:
        return False
    for hashed in r.hkeys(keys.backfeed_secrets):
        if hashed.startswith(secret_id):
            return bool(r.hdel(keys.backfeed_secrets, hashed))
    return False
