"""The admin verbs (tracker_core.admin): each change is recorded exactly once in the audit log,
under the context's actor; reads record nothing; refusals are typed (BadInput, NotFound,
Conflict), change nothing and record nothing."""

import json

import pytest

from support.projects import new_project
from support.state import contents
from tracker_core import keyspace
from tracker_core.admin import (
    backfeed_verbs,
    census_verbs,
    claim_verbs,
    dead_verbs,
    hq_verbs,
    item_verbs,
    limit_verbs,
    log_verbs,
    project_verbs,
    segment_verbs,
    token_verbs,
)
from tracker_core.admin.context import AdminContext
from tracker_core.admin.errors import AdminError, BadInput, Conflict, NotFound
from tracker_core.items.engine import Engine
from tracker_core.offload import segment_file

P = "verbs"
ACTOR = "tok123456789"
NAMES = [
    "https://example.com/a b?x=1%20#frag",
    "https://example.com/path/" + "y" * 300,
    "item:plain",
    "http://例え.jp/ü?q=%E2%9C%93",
]
K = keyspace.ProjectKeys(P)


@pytest.fixture
def ctx(redis_url):
    return AdminContext.from_url(redis_url, actor=ACTOR)


@pytest.fixture
def project(ctx):
    return new_project(ctx, P)


def records(r) -> list[dict]:
    return [fields for _, fields in r.xrange(keyspace.AUDIT)]


def once(r, before: int, action: str, project: str | None = P) -> dict:
    """The one record made since BEFORE records: ACTION by ACTOR on PROJECT; its detail."""
    made = records(r)[before:]
    assert [(e["action"], e["actor"], e["project"]) for e in made] == [(action, ACTOR, project or "")]
    if project:  # the project's own stream has the same record
        assert r.xrange(K.audit)[-1][1] == made[0]
    return json.loads(made[0]["detail"])


def test_context_names_its_actor_and_checks_projects(ctx, project, r):
    assert ctx.as_actor("other").actor == "other" and ctx.as_actor("other").conn is ctx.conn
    assert ctx.keys(P).project == P
    with pytest.raises(NotFound, match="unknown project 'nope'"):
        ctx.keys("nope")
    with pytest.raises(BadInput, match="bad project name"):
        ctx.keys("Bad Name/../x")
    assert ctx.keys("nope", must_exist=False).project == "nope"
    assert issubclass(BadInput, AdminError) and issubclass(AdminError, ValueError)


def test_project_verbs_record_once(ctx, r):
    n = len(records(r))
    assert project_verbs.create(ctx, P, {"title": "T"}) == {"created": P, "shards": 1}
    assert once(r, n, "project.create") == {"settings": {"title": "T"}}
    with pytest.raises(Conflict, match="already exists"):
        project_verbs.create(ctx, P)
    n = len(records(r))
    age = project_verbs.set_settings(ctx, P, {"max_multi": "3"})["settings_age"]
    assert once(r, n, "project.settings") == {"settings": {"max_multi": "3"}}
    n = len(records(r))
    assert project_verbs.pause(ctx, P) == {"settings_age": age + 1, "paused": True}
    once(r, n, "project.pause")
    n = len(records(r))
    assert project_verbs.resume(ctx, P)["paused"] is False
    once(r, n, "project.resume")
    n = len(records(r))
    url = "https://up.example/x/"
    assert project_verbs.set_upload_target(ctx, P, url) == {"url": url, "state": "active"}
    assert once(r, n, "upload_target") == {"url": url, "state": "active"}
    n = len(records(r))
    assert project_verbs.set_upload_target(ctx, P, url, "remove")["state"] == "removed"
    once(r, n, "upload_target")
    assert project_verbs.show(ctx, P)["upload_targets"] == {}
    assert P in project_verbs.list_projects(ctx)
    n = len(records(r))
    assert project_verbs.delete(ctx, P) == {"deleted": P}
    once(r, n, "project.delete")
    assert not r.exists(K.settings)


def test_item_verbs_record_once_with_counts(ctx, project, r):
    n = len(records(r))
    assert item_verbs.add(ctx, P, iter(NAMES + [""])) == {"added": 4, "duplicates": 0}
    assert once(r, n, "items.add") == {"queue": "todo", "added": 4, "duplicates": 0}
    seen = []
    n = len(records(r))
    item_verbs.add(ctx, P, NAMES[:2], queue="secondary", batch=1, progress=lambda a, d: seen.append((a, d)))
    assert seen == [(0, 1), (0, 2)]  # both seen by the filter before
    assert once(r, n, "items.add")["duplicates"] == 2
    n = len(records(r))
    assert item_verbs.count(ctx, P, "todo") == {"queue": "todo", "count": 4}
    assert sorted(item_verbs.sample(ctx, P, "todo", 10)["items"]) == sorted(NAMES)
    assert [p["status"] for p in item_verbs.status(ctx, P, NAMES)] == ["todo"] * 4
    assert census_verbs.status(ctx, P)["queues"]["todo"] == 4
    assert records(r)[n:] == []  # reads record nothing
    result = item_verbs.move(ctx, P, "todo", "downloader:alice", pattern="https://*")
    assert result == {"moved": 2, "cursor": 0}
    assert once(r, n, "queue.move")["moved"] == 2
    n = len(records(r))
    assert item_verbs.move_all(ctx, P, "downloader:alice", "redo") == {"moved": 2}
    assert once(r, n, "queue.move")["moved"] == 2
    n = len(records(r))
    assert item_verbs.clear(ctx, P, "redo") == {"dropped": 2}
    assert once(r, n, "queue.clear") == {"queue": "redo", "dropped": 2}
    n = len(records(r))
    result = item_verbs.redo(ctx, P, names=NAMES[:2], queue="secondary")
    assert result["from_seen"] == 2 and result["requeued"] == 2
    assert once(r, n, "items.redo")["items"] == 2
    item_verbs.clear(ctx, P, "todo")
    n = len(records(r))
    result = item_verbs.redo_all(ctx, P, names=NAMES, queue="secondary")
    assert result["requeued"] == 2 and result["skipped_by_reason"]["queued"] == 2
    assert once(r, n, "items.redo")["requeued"] == 2
    assert r.smembers(K.secondary) == set(NAMES)


def test_a_stream_stopped_by_a_bad_name_records_what_went_in(ctx, project, r):
    n = len(records(r))
    names = iter(NAMES[:2] + ["bad\0name"] + NAMES[2:])
    with pytest.raises(BadInput, match=r"item 3: .* \(stopped: 2 items added before it\)"):
        item_verbs.add(ctx, P, names, batch=2)
    detail = once(r, n, "items.add")
    assert detail["added"] == 2 and "item 3" in detail["stopped"]
    n = len(records(r))
    with pytest.raises(BadInput, match="item 2"):  # a list is checked before anything goes in
        item_verbs.add(ctx, P, ["fresh", "x" * 100_000])
    assert records(r)[n:] == [] and r.scard(K.todo) == 2


def test_claim_and_dead_verbs_record_once(ctx, project, r, redis_url):
    item_verbs.add(ctx, P, NAMES)
    engine = Engine(redis_url)
    engine.claim(P, "alice", "10.0.0.1", 2)
    engine.claim(P, "bob", "10.0.0.2", 2)
    n = len(records(r))
    page = claim_verbs.list_claims(ctx, P, count=10)
    assert sorted(row["downloader"] for row in page["claims"]) == ["alice", "alice", "bob", "bob"]
    assert records(r)[n:] == []
    assert claim_verbs.release(ctx, P, downloader="alice")["released"] == 2
    assert once(r, n, "claims.release") == {"filter": {"downloader": "alice"}, "released": 2}
    n = len(records(r))
    assert claim_verbs.release_all(ctx, P, older_than_s=0) == {"released": 2}
    assert once(r, n, "claims.release")["released"] == 2
    r.hset(K.dead, mapping={name: json.dumps({"claims": 9}) for name in NAMES[:2]})
    r.srem(K.todo, *NAMES[:2])
    n = len(records(r))
    assert sorted(row["item"] for row in dead_verbs.list_dead(ctx, P)["dead"]) == sorted(NAMES[:2])
    assert dead_verbs.requeue(ctx, P, [NAMES[0]]) == {"requeued": 1}
    assert once(r, n, "dead.requeue") == {"queue": "todo", "items": 1, "requeued": 1}
    n = len(records(r))
    assert dead_verbs.requeue_all(ctx, P, "backfeed") == {"requeued": 1}
    assert once(r, n, "dead.requeue")["requeued"] == 1
    assert r.sismember(K.backfeed, NAMES[1])


def test_limit_and_block_verbs_record_once(ctx, project, r):
    item_verbs.add(ctx, P, NAMES)
    n = len(records(r))
    assert limit_verbs.add(ctx, P, "ex", "domain:example.com", "5/m")["limit"] == "ex"
    assert once(r, n, "limit.add")["pattern"] == "domain:example.com"
    assert r.scard(K.todo) == 2  # the two example.com items are held
    assert [x["name"] for x in limit_verbs.list_limits(ctx, P)] == ["ex"]
    n = len(records(r))
    assert limit_verbs.reclassify(ctx, P) == {"held": 0}
    once(r, n, "limit.reclassify")
    n = len(records(r))
    assert limit_verbs.remove(ctx, P, "ex")["removed"] == "ex"
    once(r, n, "limit.remove")
    n = len(records(r))
    assert limit_verbs.block(ctx, "ip:10.0.0.0/8", P) == {"entry": "ip:10.0.0.0/8", "blocked": True}
    assert once(r, n, "block.add") == {"entry": "ip:10.0.0.0/8"}
    n = len(records(r))
    assert limit_verbs.block(ctx, "name:badbot", remove=False)["blocked"] is True
    once(r, n, "block.add", project=None)
    assert limit_verbs.blocks(ctx, P)["blocked_global"] == ["name:badbot"]
    n = len(records(r))
    assert limit_verbs.block(ctx, "name:badbot", remove=True)["blocked"] is False
    once(r, n, "block.remove", project=None)
    n = len(records(r))
    assert limit_verbs.reindex_blocks(ctx) == {"projects": 1}
    assert once(r, n, "block.reindex", project=None) == {"projects": 1}
    n = len(records(r))
    assert limit_verbs.reindex_blocks_if_missing(ctx) == {"projects": 0}
    assert records(r)[n:] == []  # nothing built, nothing to record


def test_backfeed_token_hq_and_segment_verbs_record_once(ctx, project, r, tmp_path):
    n = len(records(r))
    secret = backfeed_verbs.create_secret(ctx, P)
    assert once(r, n, "backfeed_secret.create") == {"id": secret["id"]}  # never the secret
    assert secret["secret"] not in json.dumps(records(r))
    n = len(records(r))
    assert backfeed_verbs.revoke_secret(ctx, P, secret["id"]) == {"revoked": secret["id"]}
    once(r, n, "backfeed_secret.revoke")
    n = len(records(r))
    assert backfeed_verbs.map_shard(ctx, P, "s1", "downloader:alice") == {
        "shard": "s1",
        "queue": "downloader:alice",
    }
    once(r, n, "backfeed_shard.map")
    assert backfeed_verbs.shard_map(ctx, P)["map"] == {"s1": "downloader:alice"}
    n = len(records(r))
    assert backfeed_verbs.unmap_shard(ctx, P, "s1")["queue"] == "backfeed"
    once(r, n, "backfeed_shard.unmap")
    n = len(records(r))
    assert backfeed_verbs.bloom_filter(ctx, P)["items"] == 0
    assert records(r)[n:] == []  # shown, not set
    assert backfeed_verbs.bloom_filter(ctx, P, capacity=5000)["capacity"] == 5000
    assert once(r, n, "backfeed.filter")["capacity"] == 5000
    n = len(records(r))
    made = token_verbs.create(ctx, P, "for a test")
    assert once(r, n, "token.create") == {
        "token_id": made["token_id"],
        "scope": P,
        "read_only": False,
        "expires_ms": None,
        "note": "for a test",
    }
    assert made["token"] not in json.dumps(records(r))
    assert [t["token_id"] for t in token_verbs.list_tokens(ctx)["tokens"]] == [made["token_id"]]
    n = len(records(r))
    assert token_verbs.revoke(ctx, made["token_id"]) == {"revoked": made["token_id"]}
    once(r, n, "token.revoke", project=None)
    n = len(records(r))
    assert hq_verbs.set_fields(ctx, {"broadcast_message": "hi"}) == {"hq": {"broadcast_message": "hi"}}
    once(r, n, "hq.set", project=None)
    assert hq_verbs.warriors(ctx)["warriors"] == []
    source = tmp_path / "in.zst"
    segment_file.write_segment(source, NAMES)
    n = len(records(r))
    result = segment_verbs.import_file(ctx, P, tmp_path / "segments", source, "todo")
    assert result["items"] == 4 and result["segment"] is None
    assert once(r, n, "segments.import")["items"] == 4
    assert segment_verbs.list_segments(ctx, P) == {"segments": {}, "offloading": 0}
    page = log_verbs.audit_page(ctx, P, count=2)
    # The project's own log, newest first: global changes (hq, token revoke) are not in it.
    assert [e["action"] for e in page["entries"]] == ["segments.import", "token.create"]
    assert page["next"] == page["entries"][-1]["id"]


@pytest.mark.parametrize(
    ("verb", "args"),
    [
        (project_verbs.show, ()),
        (project_verbs.set_settings, ({"paused": "1"},)),
        (project_verbs.pause, ()),
        (project_verbs.delete, ()),
        (project_verbs.set_upload_target, ("https://up.example/",)),
        (item_verbs.add, (NAMES,)),
        (item_verbs.count, ("todo",)),
        (item_verbs.clear, ("todo",)),
        (item_verbs.move, ("todo", "redo")),
        (item_verbs.redo, (NAMES[:1],)),
        (item_verbs.status, (NAMES,)),
        (census_verbs.status, ()),
        (claim_verbs.list_claims, ()),
        (claim_verbs.release, ("alice",)),
        (limit_verbs.add, ("n", "prefix:x", "1/s")),
        (limit_verbs.remove, ("n",)),
        (limit_verbs.reclassify, ()),
        (dead_verbs.list_dead, ()),
        (dead_verbs.requeue, (NAMES[:1],)),
        (dead_verbs.requeue_all, ()),
        (backfeed_verbs.create_secret, ()),
        (backfeed_verbs.map_shard, ("s", "todo")),
        (backfeed_verbs.bloom_filter, ()),
        (segment_verbs.list_segments, ()),
        (log_verbs.status, ()),
    ],
)
def test_an_unknown_project_is_not_found_and_records_nothing(ctx, r, verb, args):
    with pytest.raises(NotFound, match="unknown project 'nope'"):
        verb(ctx, "nope", *args)
    with pytest.raises(BadInput, match="bad project name"):
        verb(ctx, "No/Such", *args)
    assert records(r) == [] and not r.exists(keyspace.ProjectKeys("nope").settings)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda c: project_verbs.create(c, P), Conflict, "already exists"),
        (lambda c: project_verbs.create(c, "other", {"nope": "1"}), BadInput, "unknown setting"),
        (lambda c: project_verbs.set_settings(c, P, {}), BadInput, "no settings given"),
        (lambda c: project_verbs.set_settings(c, P, {"max_multi": "x"}), BadInput, "max_multi"),
        (lambda c: project_verbs.set_upload_target(c, P, "ftp://x/"), BadInput, "bad upload target"),
        (lambda c: project_verbs.set_upload_target(c, P, "https://x/", "on"), BadInput, "'state'"),
        (lambda c: item_verbs.add(c, P, NAMES, queue="elsewhere"), BadInput, "queue"),
        (lambda c: item_verbs.count(c, P, "downloader:"), BadInput, "queue"),
        (lambda c: item_verbs.move(c, P, "todo", "todo"), BadInput, "the same"),
        (lambda c: item_verbs.move(c, P, "todo", "redo", cursor=-1), BadInput, "'cursor'"),
        (lambda c: item_verbs.redo(c, P, NAMES, pattern="*"), BadInput, "give 'items'"),
        (lambda c: item_verbs.redo(c, P, []), BadInput, "give 1 to"),
        (lambda c: item_verbs.redo_all(c, P), BadInput, "give 'items'"),
        (lambda c: claim_verbs.release(c, P, "alice", 5), BadInput, "exactly one"),
        (lambda c: claim_verbs.release(c, P, older_than_s=float("nan")), BadInput, "older_than_s"),
        (lambda c: limit_verbs.add(c, P, "n", "regex:(", "1/s"), BadInput, "regular expression"),
        (lambda c: limit_verbs.add(c, P, "n", "prefix:x", "fast"), BadInput, "rate"),
        (lambda c: limit_verbs.remove(c, P, "none"), NotFound, "unknown limit 'none'"),
        (lambda c: limit_verbs.block(c, "ip:nonsense", P), BadInput, "bad block entry"),
        (lambda c: dead_verbs.requeue(c, P, NAMES, "downloader:"), BadInput, "queue"),
        (lambda c: backfeed_verbs.revoke_secret(c, P, "zz"), BadInput, "bad secret id"),
        (lambda c: backfeed_verbs.revoke_secret(c, P, "abcdef123456"), NotFound, "no backfeed secret"),
        (lambda c: backfeed_verbs.map_shard(c, P, "bad shard", "todo"), BadInput, "bad shard name"),
        (lambda c: backfeed_verbs.unmap_shard(c, P, "s"), NotFound, "not mapped"),
        (lambda c: token_verbs.create(c, "Not A Project"), BadInput, "bad scope"),
        (lambda c: token_verbs.revoke(c, "xyz"), BadInput, "bad token id"),
        (lambda c: token_verbs.revoke(c, "0123456789ab"), NotFound, "no token"),
        (lambda c: hq_verbs.set_fields(c, {"nope": "1"}), BadInput, "unknown HQ field"),
        (lambda c: hq_verbs.set_fields(c, {}), BadInput, "give one or more"),
        (lambda c: log_verbs.audit_page(c, None, 10, "not-an-id"), BadInput, "bad 'before'"),
        (lambda c: log_verbs.done_page(c, P, "/nonexistent", since="yesterday"), BadInput, "bad time"),
        (lambda c: segment_verbs.import_file(c, P, "/tmp", "/tmp/x", "done"), BadInput, "import into"),
    ],
)
def test_refusals_are_typed_change_nothing_and_record_nothing(ctx, project, r, call, error, match):
    r.sadd(K.todo, *NAMES)
    # Contents, not DUMP bytes: a read may take a step of a hash's incremental rehash, which
    # reorders its DUMP without changing it.
    before = {key: value for key, value in contents(r).items() if key != keyspace.AUDIT}
    n = len(records(r))
    with pytest.raises(error, match=match):
        call(ctx)
    assert records(r)[n:] == []
    assert {key: value for key, value in contents(r).items() if key != keyspace.AUDIT} == before


def test_a_filter_that_holds_items_keeps_its_geometry(ctx, project, r):
    item_verbs.add(ctx, P, NAMES)
    n = len(records(r))
    with pytest.raises(Conflict, match="already holds items"):
        backfeed_verbs.bloom_filter(ctx, P, fp_rate=0.01)
    assert records(r)[n:] == []
