"""Admin tokens in the core layer: scopes of several projects (bounded), read-only, expiry by the
caller's "now" (bounded), the records of the first shape read as before, last use throttled."""

import hashlib
import json

import pytest

from tracker_core import keyspace
from tracker_core.access import tokens
from tracker_core.access.tokens import DAY_MS, MAX_EXPIRY_DAYS, MAX_SCOPE_PROJECTS, TokenError

NOW = 1_800_000_000_000


def names(n: int) -> list[str]:
    return [f"p{i:02d}" for i in range(n)]


def test_a_scope_is_star_or_up_to_the_maximum_of_valid_project_names():
    assert tokens.parse_scope("*") == "*"
    assert tokens.parse_scope(" a , b,a ") == "a,b"  # each once, in the order given
    at_limit = ",".join(names(MAX_SCOPE_PROJECTS))
    assert tokens.parse_scope(at_limit) == at_limit
    longest = ",".join(f"{i:02d}" + "x" * 62 for i in range(MAX_SCOPE_PROJECTS))  # names of 64
    assert tokens.parse_scope(longest) == longest
    spaced = longest.replace(",", ", ")  # as a person types it: still within the text's bound
    assert len(spaced) <= tokens.MAX_SCOPE_CHARS and tokens.parse_scope(spaced) == longest
    with pytest.raises(TokenError, match=f"at most {MAX_SCOPE_PROJECTS}"):
        tokens.parse_scope(",".join(names(MAX_SCOPE_PROJECTS + 1)))
    for bad in ("", "a,,b", "*,a", "No Way", "a,b/c", "a" * 65):
        with pytest.raises(TokenError):
            tokens.parse_scope(bad)


def test_expiry_takes_durations_and_iso_dates_within_the_bound():
    assert tokens.parse_expiry(None, NOW) is None and tokens.parse_expiry(" ", NOW) is None
    assert tokens.parse_expiry("30d", NOW) == NOW + 30 * DAY_MS
    assert tokens.parse_expiry("12h", NOW) == NOW + 12 * 3_600_000
    assert tokens.parse_expiry("90m", NOW) == NOW + 90 * 60_000
    assert tokens.parse_expiry("1s", NOW) == NOW + 1000
    assert tokens.parse_expiry(f"{MAX_EXPIRY_DAYS}d", NOW) == NOW + MAX_EXPIRY_DAYS * DAY_MS
    with pytest.raises(TokenError, match=f"more than {MAX_EXPIRY_DAYS} days"):
        tokens.parse_expiry(f"{MAX_EXPIRY_DAYS * 24 * 3600 + 1}s", NOW)
    # NOW is 2027-01-15T08:00Z; a date is its midnight UTC, a time with an offset is taken at it.
    assert tokens.parse_expiry("2027-02-01", NOW) == 1_801_440_000_000
    assert tokens.parse_expiry("2027-02-01T02:00:00+02:00", NOW) == 1_801_440_000_000
    with pytest.raises(TokenError, match="not in the future"):
        tokens.parse_expiry("2027-01-15", NOW)
    for bad in ("0s", "0d", "2020-01-01", "soon", "30 d", "-5m", "30w", "2027-13-01"):
        with pytest.raises(TokenError):
            tokens.parse_expiry(bad, NOW)


def test_a_token_of_the_first_shape_is_stored_as_before_and_a_stored_one_still_works(r):
    text, record = tokens.create(r, "proj", "ops", now_ms=NOW)
    stored = json.loads(r.hget(keyspace.ADMIN_TOKENS, record.token_id))
    assert set(stored) == {"sha256", "scope", "note", "created_ms"} and stored["scope"] == "proj"
    # A record as an earlier release wrote it (no created time even, as the oldest had).
    old = "trk_0123456789ab_" + "A" * 43
    r.hset(
        keyspace.ADMIN_TOKENS,
        "0123456789ab",
        json.dumps({"sha256": hashlib.sha256(old.encode()).hexdigest(), "scope": "*"}),
    )
    found = tokens.verify(r, old, NOW)
    assert found.is_global and not found.read_only and found.expires_ms is None
    assert tokens.verify(r, text, NOW).allows("proj") and not tokens.verify(r, text, NOW).allows("other")


def test_a_token_of_a_new_shape_shows_an_earlier_release_a_scope_that_allows_nothing(r):
    for scope, read_only, expires_ms in (("a,b", False, None), ("*", True, None), ("a", False, NOW + 1)):
        text, record = tokens.create(r, scope, read_only=read_only, expires_ms=expires_ms, now_ms=NOW)
        stored = json.loads(r.hget(keyspace.ADMIN_TOKENS, record.token_id))
        assert stored["scope"] == tokens.LEGACY_SCOPE and not keyspace.valid_project_name(stored["scope"])
        assert stored["scopes"] == scope.split(",") and stored["read_only"] is read_only
        found = tokens.verify(r, text, NOW)
        assert (found.scope, found.read_only, found.expires_ms) == (scope, read_only, expires_ms)
    both = tokens.verify(r, tokens.create(r, "a,b", now_ms=NOW)[0], NOW)
    assert both.allows("a") and both.allows("b") and not both.allows("c") and not both.is_global


def test_an_expired_token_verifies_as_an_unknown_one(r):
    text, _ = tokens.create(r, "*", expires_ms=NOW + 1000, now_ms=NOW)
    assert tokens.verify(r, text, NOW + 999) is not None
    assert tokens.verify(r, text, NOW + 1000) is None  # at its expiry it is gone
    past, _ = tokens.create(r, "*", expires_ms=1000, now_ms=NOW)
    assert tokens.verify(r, past) is None  # no NOW given: Redis's clock
    assert tokens.verify(r, past, 999) is not None


def test_last_use_is_written_at_most_once_a_minute_per_token_and_forgotten_with_it(r):
    _, record = tokens.create(r, "*", now_ms=NOW)
    other = tokens.create(r, "*", now_ms=NOW)[1]
    assert tokens.touch(r, record.token_id, NOW) is True
    assert tokens.touch(r, record.token_id, NOW + tokens.TOUCH_EVERY_MS - 1) is False
    assert tokens.touch(r, other.token_id, NOW + 5) is True  # per token
    assert r.hget(keyspace.ADMIN_TOKENS_USED, record.token_id) == str(NOW)
    assert tokens.touch(r, record.token_id, NOW + tokens.TOUCH_EVERY_MS) is True
    listed = {t.token_id: t.last_used_ms for t in tokens.list_tokens(r)}
    assert listed == {record.token_id: NOW + tokens.TOUCH_EVERY_MS, other.token_id: NOW + 5}
    assert tokens.revoke(r, record.token_id)
    assert r.hget(keyspace.ADMIN_TOKENS_USED, record.token_id) is None
    assert tokens.revoke(r, record.token_id) is False
