"""Names that are not valid UTF-8 are refused at every way in, one entry at a time, and counted.

A warrior gets item names as JSON text, so a name that is not UTF-8 could be claimed (the
script puts it and the rest of its multi=K batch in `out`) but never answered: the batch was
stranded. Backfeed bodies, admin text uploads, `tracker items add` files and imported segment
files now refuse such names (and names holding a NUL, which a multi claim uses to join names)
while taking the rest of the batch.
"""

from __future__ import annotations

import json

import pytest
import zstandard
from click.testing import CliRunner

from support.projects import new_project
from tracker_api.cli import main
from tracker_core.access import backfeed_secrets, tokens
from tracker_core.admin import dead_verbs, item_verbs, limit_verbs, segment_transfer
from tracker_core.admin.context import AdminContext
from tracker_core.items import intake
from tracker_core.keyspace import ProjectKeys

P = "utf"
K = ProjectKeys(P)
GOOD = ["https://example.com/a b?q=%20#x", "https://例え.jp/パス", "user:ünïcødé"]
BAD = [b"https://example.com/\xff\xfe", b"caf\xe9", b"\xc3", b"https://x.org/\xed\xa0\x80"]


@pytest.fixture
def project(ctx):
    return new_project(ctx, P)


def claim_everything(engine) -> list[str]:
    """Claim with multi=100 until empty; every answer must be text a warrior can decode."""
    got = []
    while True:
        status, items = engine.claim(P, "alice", "10.0.0.1", 100)
        if status != 200:
            return got
        for item in items:
            item.encode("utf-8")  # raises on a lone surrogate (an undecodable byte)
        got += items


# -- backfeed -----------------------------------------------------------------------------------


@pytest.fixture
def secret(project, r):
    return backfeed_secrets.create(r, K)[1]


def post(web, secret, body: bytes, query: str | None = None):
    return web.simulate_post(f"/backfeed/legacy/{P}-{secret}", body=body, query_string=query)


def test_backfeed_refuses_each_entry_that_is_not_utf8_and_takes_the_rest(web, secret, r, engine):
    body = b"\0".join([g.encode() for g in GOOD] + BAD) + b"\0"
    res = post(web, secret, body)
    assert res.status_code == 200, res.text
    assert res.json == {
        "status_code": 200,
        "data": f"{len(GOOD)} items queued for deduplication; refused: {len(BAD)} not valid UTF-8",
    }
    assert r.smembers(K.backfeed) == set(GOOD)
    stats = r.hgetall(K.stats)
    assert stats["backfeed_refused_not_utf8"] == str(len(BAD))
    assert stats["backfeed_new"] == str(len(GOOD))
    assert sorted(claim_everything(engine)) == sorted(GOOD)


def test_backfeed_with_another_delimiter_refuses_entries_with_nul_or_bad_bytes(web, secret, r):
    body = b"ok-1\nbad\0name\nok-2\ncaf\xe9\n"
    res = post(web, secret, body, "delimiter=%0A&itemseparator=%1F")
    assert res.status_code == 200
    assert res.json["data"] == (
        "2 items queued for deduplication; refused: 1 contains NUL, 1 not valid UTF-8"
    )
    assert r.smembers(K.backfeed) == {"ok-1", "ok-2"}
    assert (r.hget(K.stats, "backfeed_refused_nul"), r.hget(K.stats, "backfeed_refused_not_utf8")) == (
        "1",
        "1",
    )


def test_a_delimiter_byte_inside_a_character_cannot_split_it_into_bad_names(web, secret, r):
    # "©" is C2 A9: a delimiter of A9 cuts it and leaves C2 alone, which is refused.
    res = post(web, secret, "a©b".encode(), "delimiter=%A9")
    assert res.status_code == 200
    assert res.json["data"] == "1 items queued for deduplication; refused: 1 not valid UTF-8"
    assert r.smembers(K.backfeed) == {"b"}


def test_a_post_of_only_bad_names_queues_nothing_and_a_wrong_secret_counts_none(web, secret, r):
    res = post(web, secret, b"\xff\0\xfe")
    assert res.status_code == 200 and res.json["data"].startswith("0 items queued")
    assert r.scard(K.backfeed) == 0
    res = post(web, "wrongsecret1", b"\xff\0\xfe")
    assert res.status_code == 403
    assert r.hget(K.stats, "backfeed_refused_not_utf8") == "2"


# -- admin API text upload, JSON upload ----------------------------------------------------------


def test_admin_text_upload_refuses_bad_lines_and_adds_the_rest(web, admin, project, r, engine):
    token = tokens.create(r, P)[0]
    body = b"\n".join([g.encode() for g in GOOD] + BAD) + b"\n"
    res = web.simulate_post(
        f"/api/admin/projects/{P}/queues/todo/items",
        body=body,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "text/plain"},
    )
    assert res.status_code == 200, res.text
    assert res.json == {"added": len(GOOD), "duplicates": 0, "refused_not_utf8": len(BAD)}
    assert r.smembers(K.todo) == set(GOOD)
    assert r.hget(K.stats, "items_refused_not_utf8") == str(len(BAD))
    assert sorted(claim_everything(engine)) == sorted(GOOD)


def test_admin_json_upload_cannot_carry_a_lone_surrogate(web, admin, project, r):
    token = tokens.create(r, P)[0]
    res = web.simulate_post(
        f"/api/admin/projects/{P}/queues/todo/items",
        body=b'{"items": ["ok", "bad\\udc80"]}',
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    assert res.status_code == 400
    assert r.scard(K.todo) == 0


# -- tracker items add ---------------------------------------------------------------------------


def test_cli_items_add_refuses_bad_lines_and_adds_the_rest(project, redis_url, r, tmp_path, engine):
    source = tmp_path / "items.txt"
    source.write_bytes(b"\n".join([g.encode() for g in GOOD] + BAD) + b"\n")
    res = CliRunner().invoke(main, ["--redis-url", redis_url, "items", "add", P, str(source), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output.splitlines()[-1]) == {
        "added": len(GOOD),
        "duplicates": 0,
        "refused_not_utf8": len(BAD),
    }
    assert r.smembers(K.todo) == set(GOOD)
    assert r.hget(K.stats, "items_refused_not_utf8") == str(len(BAD))
    assert sorted(claim_everything(engine)) == sorted(GOOD)


def test_admin_add_items_refuses_surrogate_escaped_names(project, r):
    names = [*GOOD, *(b.decode("utf-8", "surrogateescape") for b in BAD)]
    refused = {}
    assert list(intake.add(r, K, names, refused=refused)) == [(len(GOOD), 0)]
    assert refused == {"not_utf8": len(BAD)}
    assert r.smembers(K.todo) == set(GOOD)


# -- segment import (a file from elsewhere goes through the Bloom filter) ------------------------


def test_segment_import_refuses_bad_names_of_a_foreign_file(project, r, tmp_path, engine):
    source = tmp_path / "foreign.zst"
    source.write_bytes(zstandard.ZstdCompressor().compress(b"\0".join([g.encode() for g in GOOD] + BAD)))
    result = segment_transfer.import_segment(r, K, tmp_path / "segments", source, "todo")
    assert result == {"segment": None, "items": len(GOOD), "duplicates": 0, "refused_not_utf8": len(BAD)}
    assert r.smembers(K.todo) == set(GOOD)
    assert sorted(claim_everything(engine)) == sorted(GOOD)


# -- names queued before the check: admin verbs still work over them ----------------------------


def test_admin_verbs_work_over_a_name_queued_before_names_had_to_be_utf8(project, redis_url, engine, ctx):
    import redis

    raw = redis.Redis.from_url(redis_url)
    legacy = b"https://example.com/old-\xff"
    raw.sadd(K.todo, legacy, b"https://example.com/ok")
    limit_verbs.add(ctx, P, "site", "domain:example.com", "1/s")  # reclassify over it
    assert {m.split(b"\0", 1)[1] for m in raw.zrange(K.limited, 0, -1)} == {legacy, b"https://example.com/ok"}
    limit_verbs.remove(ctx, P, "site")
    raw.delete(K.limited, K.limits_ready)
    raw.sadd(K.secondary, legacy)
    assert item_verbs.move(ctx, P, "secondary", "todo")["moved"] == 1
    raw.hset(K.dead, legacy, "{}")
    raw.srem(K.todo, legacy)
    limit_verbs.add(ctx, P, "site2", "domain:example.com", "1/s")
    assert dead_verbs.requeue(ctx, P, [legacy.decode("utf-8", "surrogateescape")]) == {"requeued": 1}
    assert legacy in {m.split(b"\0", 1)[1] for m in raw.zrange(K.limited, 0, -1)}


@pytest.fixture
def ctx(redis_url):
    return AdminContext.from_url(redis_url)
