"""Per-project backfeed secrets: created, listed and revoked by admins, stored only as hashes.

A grab script carries its project's secret in the backfeed URL. Redis keeps the SHA-256 of each
secret (hex) mapped to a small record, so a dump of Redis or a log line never reveals one; the
hot path hashes what it was given and the backfeed script checks it in the same round trip.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
import time

SECRET_BYTES = 16
ID_CHARS = 12  # a secret's id: the first characters of its hash
ID_RE = re.compile(r"[0-9a-fA-F]{6,12}\Z")


class SecretError(ValueError):
    """A bad or ambiguous secret id; the message is one line."""


def digest(secret: str | bytes) -> str:
    """Hash SECRET the way it is stored."""
    raw = secret.encode("utf-8", "surrogateescape") if isinstance(secret, str) else secret
    return hashlib.sha256(raw).hexdigest()


def create(r, keys, copies=()) -> tuple[str, str]:
    """Make a new secret for the project of KEYS; return (id, secret). Only the hash is stored,
    in KEYS and in each of COPIES (the other shards of a sharded project, each of whose scripts
    checks the secret on its own shard)."""
    secret = secrets.token_hex(SECRET_BYTES)  # hex: never contains the '-' that ends the project
    hashed = digest(secret)
    record = json.dumps({"id": hashed[:ID_CHARS], "created": int(time.time())})
    for shard in (*copies, keys):  # KEYS last: what list_secrets reads shows it only once everywhere
        r.hset(shard.backfeed_secrets, hashed, record)
    return hashed[:ID_CHARS], secret


def list_secrets(r, keys) -> list[dict]:
    """Records (id, created) of the project's secrets; the secrets themselves are not kept."""
    return sorted(
        (json.loads(v) for v in r.hvals(keys.backfeed_secrets)), key=lambda rec: (rec["created"], rec["id"])
    )


def revoke(r, keys, secret_id: str, copies=()) -> str | None:
    """Revoke the secret whose id is SECRET_ID; return its id, or None when there is none.

    SECRET_ID is the 12-character id `list_secrets` shows, or a prefix of at least 6 of them
    that only one secret has: a prefix (or id) that several secrets share raises SecretError
    and revokes nothing.
    """
    if type(secret_id) is not str or not ID_RE.match(secret_id):
        raise SecretError(
            f"bad secret id {str(secret_id)[:40]!r}: give the 12 hex characters "
            "the list shows (or 6 or more of the first ones)"
        )
    secret_id = secret_id.lower()
    matches = []
    for hashed, _ in r.hscan_iter(keys.backfeed_secrets):
        if hashed[:ID_CHARS].startswith(secret_id):
            matches.append(hashed)
    if len(matches) > 1:
        raise SecretError(
            f"secret id {secret_id!r} is ambiguous: {len(matches)} secrets start "
            "with it; give the full 12-character id"
        )
    if not matches:
        return None
    for shard in copies:  # the other shards first: KEYS is what list_secrets shows
        r.hdel(shard.backfeed_secrets, matches[0])
    if not r.hdel(keys.backfeed_secrets, matches[0]):
        return None
    return matches[0][:ID_CHARS]
