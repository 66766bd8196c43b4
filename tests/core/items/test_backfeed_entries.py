"""Backfeed refuses bad entries one by one: one over-long or empty entry never refuses the post.

A grab script that gets a 400 retries the post and then fails the item it was working on, so an
entry that cannot be an item (empty, longer than /done takes back, not UTF-8, holding NUL, with an
empty dedup key) is left out and counted by reason, the rest is queued, and the 200 answer says
how many were refused. Only whole-post bounds (body size, entries per post) refuse the post.
"""

import json
import urllib.request
from urllib.parse import quote

import pytest

from tracker_core.access import backfeed_secrets
from tracker_core.admin import project_verbs
from tracker_core.items import backfeed
from tracker_core.keyspace import ProjectKeys

P = "urls"
K = ProjectKeys(P)
LIMIT = backfeed.MAX_ITEM_BYTES  # 4,096 bytes
TOO_LONG = f"longer than {LIMIT} bytes"

URLS = [
    "https://example.org/a b/c?d=%20e&f=1#frag",
    "http://user:pw@example.org:8080/%E2%98%BA/?q=a%2Fb#x y",
    "https://example.org/p?" + "k=%41%25&" * 300 + "#end",  # about 2.7 KB
    "https://example.org/" + "seg%20ment/" * 370,  # about 4 KB
]


def padded(prefix: str, size: int) -> str:
    """A URL of exactly SIZE bytes (ASCII) starting with PREFIX."""
    return prefix + "x" * (size - len(prefix))


@pytest.fixture
def secret(admin, r):
    project_verbs.create(admin, P)
    return backfeed_secrets.create(r, K)[1]


def post(web, secret, body: bytes, query: str | None = None, project: str = P):
    return web.simulate_post(f"/backfeed/legacy/{project}-{secret}", body=body, query_string=query)


def answer_of(res) -> tuple[int, str]:
    """(entries taken, the refusal part of data) of a 200 answer."""
    assert res.status_code == 200, res.text
    assert res.json["status_code"] == 200
    taken, _, rest = res.json["data"].partition(" items queued for deduplication")
    return int(taken), rest


def refused_stats(r) -> dict:
    """The per-entry refusal counters (backfeed_refused_REASON)."""
    return {
        f: int(v)
        for f, v in r.hgetall(K.stats).items()
        if f.startswith("backfeed_refused_") and f != "backfeed_refused_full"
    }


def test_an_over_long_and_an_empty_entry_leave_the_rest_of_a_url_post_queued(web, secret, r):
    too_long = padded("https://example.org/too-long?q=", LIMIT + 1)
    entries = [URLS[0], too_long, URLS[1], "", URLS[2], URLS[3]]
    res = post(web, secret, "\0".join(entries).encode() + b"\0")
    taken, refused = answer_of(res)
    assert taken == 4 and refused == f"; refused: 1 empty, 1 {TOO_LONG}"
    assert r.smembers(K.backfeed) == set(URLS)
    assert refused_stats(r) == {"backfeed_refused_empty": 1, "backfeed_refused_too_long": 1}
    assert r.hget(K.stats, "backfeed_new") == "4"
    assert not r.hget(K.stats, "backfeed_bad_body")


def test_an_entry_at_the_length_limit_is_queued_and_one_byte_more_is_refused(web, secret, r):
    at_limit = padded("https://example.org/at-limit?q=", LIMIT)
    past = padded("https://example.org/past-limit?q=", LIMIT + 1)
    multibyte = "https://example.org/" + "é" * ((LIMIT - 20) // 2)  # 4,096 bytes, 2,058 chars
    assert len(multibyte.encode()) == LIMIT
    taken, refused = answer_of(post(web, secret, f"{at_limit}\0{past}\0{multibyte}".encode()))
    assert (taken, refused) == (2, f"; refused: 1 {TOO_LONG}")
    assert r.smembers(K.backfeed) == {at_limit, multibyte}
    # Past the limit in bytes, though under it in characters: /done could not report it.
    over = "https://example.org/" + "é" * ((LIMIT - 20) // 2) + "a"
    assert len(over) < LIMIT < len(over.encode())
    assert answer_of(post(web, secret, over.encode())) == (0, f"; refused: 1 {TOO_LONG}")
    assert refused_stats(r) == {"backfeed_refused_too_long": 2}


@pytest.mark.parametrize(
    "body,taken,empty",
    [
        (b"a\0b\0", 2, 0),  # a trailing delimiter ends the last entry: nothing refused
        (b"a\0b", 2, 0),
        (b"", 0, 0),  # an empty post: no entry at all
        (b"a\0\0b\0", 2, 1),  # two delimiters in a row: an empty entry between them
        (b"\0a\0", 1, 1),  # a leading delimiter: an empty first entry
        (b"a\0\0", 1, 1),  # only the end after the last delimiter is not an entry
        (b"\0", 0, 1),
    ],
)
def test_what_counts_as_an_empty_entry(web, secret, r, body, taken, empty):
    got, refused = answer_of(post(web, secret, body))
    assert got == taken
    assert refused == (f"; refused: {empty} empty" if empty else "")
    assert refused_stats(r) == ({"backfeed_refused_empty": empty} if empty else {})


def test_empty_entries_with_another_delimiter(web, secret, r):
    res = post(web, secret, b"https://a.example/1\n\nhttps://a.example/2\n", "delimiter=%0A")
    assert answer_of(res) == (2, "; refused: 1 empty")
    assert r.smembers(K.backfeed) == {"https://a.example/1", "https://a.example/2"}


def test_an_entry_with_an_empty_dedup_key_is_refused_on_its_own(web, secret, r):
    # Every such entry would share the key "": all but the first would be dropped as seen.
    body = b"user:a\x1fhttps://a.example/x\0\x1fhttps://a.example/y\0\x1fz\0user:b\x1f\0"
    res = post(web, secret, body, "itemseparator=%1F")
    assert answer_of(res) == (2, "; refused: 2 empty dedup key")
    assert r.smembers(K.backfeed) == {"user:a\x1fhttps://a.example/x", "user:b\x1f"}
    assert refused_stats(r) == {"backfeed_refused_empty_key": 2}


def test_every_reason_in_one_post_is_counted_and_the_rest_queued(web, secret, r):
    good = [u + "#every" for u in URLS]
    bad = [b"", b"x" * (LIMIT + 1), b"https://a.example/\xff", b"https://a.example/\0nul"]
    body = b"\n".join([good[0].encode(), *bad, *[g.encode() for g in good[1:]]]) + b"\n"
    taken, refused = answer_of(post(web, secret, body, "delimiter=%0A"))
    assert taken == len(good)
    assert refused == f"; refused: 1 empty, 1 {TOO_LONG}, 1 contains NUL, 1 not valid UTF-8"
    assert r.smembers(K.backfeed) == set(good)
    assert refused_stats(r) == {
        "backfeed_refused_empty": 1,
        "backfeed_refused_too_long": 1,
        "backfeed_refused_not_utf8": 1,
        "backfeed_refused_nul": 1,
    }


def test_a_post_of_only_bad_entries_still_checks_the_secret_and_counts_after_it(web, secret, r):
    body = b"\0" + b"y" * (LIMIT + 1) + b"\0"
    res = post(web, "0" * 32, body)
    assert res.status_code == 403 and res.json["status_code"] == 403
    assert refused_stats(r) == {}  # only the wrong secret is counted (backfeed_refused)
    assert r.hget(K.stats, "backfeed_refused") == "1"
    assert answer_of(post(web, secret, body)) == (0, f"; refused: 1 empty, 1 {TOO_LONG}")
    assert refused_stats(r) == {"backfeed_refused_empty": 1, "backfeed_refused_too_long": 1}
    assert not r.exists(K.backfeed)


def test_whole_post_bounds_still_refuse_the_whole_post(web, secret, r):
    per_post = backfeed.MAX_ITEMS_PER_POST
    # Refused entries count towards the entries per post: each costs work.
    at = b"\0".join(b"https://a.example/%d" % i for i in range(per_post - 1)) + b"\0\0"
    assert answer_of(post(web, secret, at)) == (per_post - 1, "; refused: 1 empty")
    past = b"\0".join(b"https://b.example/%d" % i for i in range(per_post)) + b"\0\0"
    res = post(web, secret, past)
    assert res.status_code == 400 and res.json["reason"] == f"too many items: at most {per_post} per post"
    # Delimiters alone: refused before the body is split into a list.
    res = post(web, secret, b"\0" * (per_post + 1))
    assert res.status_code == 400
    assert r.scard(K.backfeed) == per_post - 1
    assert r.hget(K.stats, "backfeed_bad_body") == "2"
    res = post(web, secret, b"a\0" * (3 * 1024 * 1024))
    assert res.status_code == 413 and res.json["status_code"] == 413


def test_parse_body_fast_and_slow_paths_agree():
    urls = [u.encode() for u in URLS]
    for delimiter in (b"\0", b"\n", b"\r\n", b"\xff"):
        body = delimiter.join(urls) + delimiter
        entries, keys, refused = backfeed.parse_body(body, delimiter, None)
        assert entries == urls and keys == urls and refused == {}
        bad = delimiter.join([urls[0], b"", b"z" * (LIMIT + 1), urls[1]])
        entries, _, refused = backfeed.parse_body(bad, delimiter, None)
        assert entries == urls[:2] and refused == {backfeed.EMPTY: 1, TOO_LONG: 1}


def test_the_real_server_takes_a_url_post_with_a_bad_entry(secret, live_server, r):
    too_long = padded("https://example.org/too-long?q=", LIMIT + 1)
    body = "\0".join([*URLS, "", too_long]).encode() + b"\0"
    request = urllib.request.Request(
        f"{live_server.base}/backfeed/legacy/{P}-{quote(secret)}?delimiter=%00", data=body, method="POST"
    )
    with urllib.request.urlopen(request, timeout=10) as res:
        assert res.status == 200
        answer = json.loads(res.read())
    assert answer == {
        "status_code": 200,
        "data": f"{len(URLS)} items queued for deduplication; refused: 1 empty, 1 {TOO_LONG}",
    }
    assert r.smembers(K.backfeed) == set(URLS)
