"""Blocks: project and global blocks kept apart, ignore_global_blocked, entries checked and
normalised, CIDR ranges matched inside the claim script (claim-21.lua, set_blocks-4.lua,
tracker_core/blocks.py), through the engine, the admin API, the CLI and HTTP."""

import json

import orjson
import pytest
from click.testing import CliRunner
from falcon import testing

from support.projects import new_project
from tracker_api.app import create_app
from tracker_api.cli import main
from tracker_api.web.config import AppConfig
from tracker_core import blocks, scripts
from tracker_core.admin import item_verbs, limit_verbs, project_verbs
from tracker_core.admin.context import AdminContext
from tracker_core.admin.errors import AdminError
from tracker_core.keyspace import GLOBAL_BLOCKED, ProjectKeys

P, OTHER = "blk", "blk2"
K = ProjectKeys(P)
ITEMS = [f"https://example.com/a b/{n}?q=%20&r=#frag/" + "x" * 2000 for n in range(40)]


@pytest.fixture
def project(ctx):
    return new_project(ctx, P, ITEMS)


def claim(engine, who="alice", ip="192.0.2.1"):
    return engine.claim(P, who, ip, 1)[0]


def state(r):
    return (r.zrange(K.out, 0, -1), r.smembers(K.todo), r.hgetall(K.claims))


# -- project and global blocks are independent --------------------------------------------------


@pytest.mark.parametrize(
    "entry,who,ip",
    [
        ("name:mallory", "mallory", "192.0.2.1"),
        ("ip:198.51.100.7", "alice", "198.51.100.7"),
        ("ip:10.0.0.0/8", "alice", "10.20.30.40"),
    ],
)
def test_lifting_the_global_block_leaves_the_projects_own(project, engine, entry, who, ip, ctx):
    limit_verbs.block(ctx, entry, P)
    limit_verbs.block(ctx, entry)  # the same entry, globally
    assert claim(engine, who, ip) == 403
    limit_verbs.block(ctx, entry, remove=True)  # lift the global one
    assert claim(engine, who, ip) == 403  # the project's own still holds
    limit_verbs.block(ctx, entry)
    limit_verbs.block(ctx, entry, P, remove=True)  # and the other way round
    assert claim(engine, who, ip) == 403
    limit_verbs.block(ctx, entry, remove=True)
    assert claim(engine, who, ip) == 200


def test_a_global_block_reaches_every_project_old_and_new(project, engine, ctx):
    limit_verbs.block(ctx, "ip:2001:db8::/32")
    project_verbs.create(ctx, OTHER)
    item_verbs.add(ctx, OTHER, ["one", "two"])
    assert engine.claim(OTHER, "alice", "2001:db8:1::1", 1)[0] == 403
    assert claim(engine, "alice", "2001:db8:ffff:ffff::1") == 403
    assert limit_verbs.blocks(ctx, OTHER)["blocked_global"] == ["ip:2001:db8::/32"]
    assert limit_verbs.blocks(ctx, OTHER)["blocked"] == []
    assert limit_verbs.blocks(ctx) == {"global": ["ip:2001:db8::/32"]}
    limit_verbs.block(ctx, "ip:2001:db8::/32", remove=True)
    assert engine.claim(OTHER, "alice", "2001:db8:1::1", 1)[0] == 200
    assert claim(engine, "alice", "2001:db8:ffff:ffff::1") == 200


def test_ignore_global_blocked_keeps_only_the_projects_own(project, engine, r, ctx):
    limit_verbs.block(ctx, "name:mallory")
    limit_verbs.block(ctx, "ip:203.0.113.0/24")
    limit_verbs.block(ctx, "name:trudy", P)
    assert claim(engine, "mallory") == 403 and claim(engine, ip="203.0.113.9") == 403
    project_verbs.set_settings(ctx, P, {"ignore_global_blocked": "true"})
    assert r.hget(K.settings, "ignore_global_blocked") == "1"
    assert claim(engine, "mallory") == 200 and claim(engine, ip="203.0.113.9") == 200
    assert claim(engine, "trudy") == 403
    # A global block made while the project ignores them is kept and applies once it stops.
    limit_verbs.block(ctx, "name:eve")
    assert claim(engine, "eve") == 200
    project_verbs.set_settings(ctx, P, {"ignore_global_blocked": "0"})
    assert claim(engine, "eve") == 403 and claim(engine, "mallory") == 403
    with pytest.raises(ValueError, match="ignore_global_blocked: must be true or false"):
        project_verbs.set_settings(ctx, P, {"ignore_global_blocked": "sometimes"})


# -- IP entries: checked, normalised, CIDR ranges -----------------------------------------------


@pytest.mark.parametrize(
    "given,stored",
    [
        ("ip:198.51.100.7", "ip:198.51.100.7"),
        ("  ip:198.51.100.7 ", "ip:198.51.100.7"),
        ("ip:10.0.0.1/32", "ip:10.0.0.1"),
        ("ip:10.0.0.0/8", "ip:10.0.0.0/8"),
        ("ip:::ffff:10.1.2.3", "ip:10.1.2.3"),
        ("ip:::ffff:10.0.0.0/104", "ip:10.0.0.0/8"),
        ("ip:2001:DB8:0:0::1", "ip:2001:db8::1"),
        ("ip:[2001:db8::1]", "ip:2001:db8::1"),
        ("ip:2001:db8::/32", "ip:2001:db8::/32"),
        ("ip:2001:db8::1/128", "ip:2001:db8::1"),
        ("ip:0.0.0.0/0", "ip:0.0.0.0/0"),
        ("name:mallory", "name:mallory"),
        ("name:" + "m" * 30, "name:" + "m" * 30),
    ],
)
def test_entries_are_stored_in_one_spelling(project, r, given, stored, ctx):
    assert limit_verbs.block(ctx, given, P)["entry"] == stored
    assert r.smembers(K.blocked) == {stored}
    assert limit_verbs.block(ctx, given, P, remove=True)["entry"] == stored  # lifted however it is spelled
    assert r.smembers(K.blocked) == set()


@pytest.mark.parametrize(
    "entry,reason",
    [
        ("ip:nope", "is not an IP address or CIDR range"),
        ("ip:", "is not an IP address or CIDR range"),
        ("ip:10.0.0.256", "is not an IP address or CIDR range"),
        ("ip:10.0.0.0/33", "is not an IP address or CIDR range"),
        ("ip:10.0.0.1/8", "has host bits set (did you mean 10.0.0.0/8?)"),
        ("ip:2001:db8::1/32", "did you mean 2001:db8::/32?"),
        ("ip:10.0.0.1:80", "is not an IP address"),
        ("1.2.3.4", "use ip:ADDRESS, ip:CIDR or name:DOWNLOADER"),
        ("host:example.com", "use ip:ADDRESS, ip:CIDR or name:DOWNLOADER"),
        ("", "empty block entry"),
        ("name:mm", "a downloader name matches"),  # 2 characters: no warrior has it
        ("name:" + "m" * 31, "a downloader name matches"),
        ("name:bad name", "a downloader name matches"),
        ("name:" + "m" * 200, "longer than 200 characters"),
    ],
)
def test_bad_entries_are_refused_with_a_reason_and_change_nothing(project, r, entry, reason, ctx):
    before = (r.smembers(K.blocked), r.zrange(K.blocked_index, 0, -1), r.smembers(GLOBAL_BLOCKED))
    for scope in (P, None):
        with pytest.raises(AdminError, match=None) as caught:
            limit_verbs.block(ctx, entry, scope)
        assert reason in str(caught.value) and "\n" not in str(caught.value)
    assert (r.smembers(K.blocked), r.zrange(K.blocked_index, 0, -1), r.smembers(GLOBAL_BLOCKED)) == before


@pytest.mark.parametrize(
    "ip,blocked",
    [
        ("10.0.0.0", True),
        ("10.255.255.255", True),
        ("10.1.2.3", True),
        ("9.255.255.255", False),
        ("11.0.0.0", False),
        ("172.16.5.4", True),
        ("172.16.6.0", False),
        ("172.16.4.255", False),  # a nested /24
        ("192.0.2.77", True),
        ("192.0.2.76", False),
        ("192.0.2.78", False),
        ("::ffff:10.9.8.7", True),  # IPv4-mapped is the IPv4 one
        ("2001:db8::", True),
        ("2001:db8:ffff:ffff:ffff:ffff:ffff:ffff", True),
        ("2001:db7:ffff:ffff:ffff:ffff:ffff:ffff", False),
        ("2001:db9::", False),
        ("2001:db8:0:0:0:0:0:1", True),
        ("fe80::1", True),
        ("fe80::2", False),
        ("0.0.0.0", False),
        ("255.255.255.255", False),
        ("::", False),
        ("::1", False),
        ("", False),
        ("/run/tracker.sock", False),  # no address: no IP block
    ],
)
def test_ranges_and_addresses_are_matched_in_the_claim_script(project, engine, r, ip, blocked, ctx):
    for entry in (
        "ip:10.0.0.0/8",
        "ip:10.1.0.0/16",
        "ip:172.16.0.0/12",
        "ip:192.0.2.77",
        "ip:2001:db8::/32",
        "ip:fe80::1",
    ):
        limit_verbs.block(ctx, entry, P)
    limit_verbs.block(ctx, "ip:172.16.0.0/12", P, remove=True)
    limit_verbs.block(ctx, "ip:172.16.5.0/24", P)  # a range inside a lifted one
    before = state(r)
    status = claim(engine, "alice", ip)
    assert status == (403 if blocked else 200)
    if blocked:
        assert state(r) == before and int(r.hget(K.stats, "requests_blocked")) == 1


def test_ipv6_ranges_do_not_match_ipv4_clients(project, engine, ctx):
    limit_verbs.block(ctx, "ip:::/0", P)
    assert claim(engine, "alice", "2001:db8::1") == 403
    assert claim(engine, "alice", "192.0.2.1") == 200
    limit_verbs.block(ctx, "ip:0.0.0.0/0", P)
    assert claim(engine, "alice", "192.0.2.1") == 403


def test_the_index_holds_merged_ranges_per_view(project, r, ctx):
    limit_verbs.block(ctx, "ip:10.0.0.0/8", P)
    limit_verbs.block(ctx, "ip:10.1.0.0/16", P)
    limit_verbs.block(ctx, "ip:11.0.0.0/8")
    limit_verbs.block(ctx, "name:mallory")
    assert sorted(r.zrange(K.blocked_index, 0, -1)) == sorted(
        ["p40a000000-0affffff", "a40a000000-0bffffff", "an:mallory"]
    )
    assert {score for _, score in r.zrange(K.blocked_index, 0, -1, withscores=True)} == {0}


def test_thousands_of_blocks_are_matched_exactly(project, admin, engine, r):
    entries = [f"ip:100.{n // 256}.{n % 256}.0/24" for n in range(0, 4000, 2)]
    entries += [f"ip:2001:db8:{n:x}::/48" for n in range(0, 1000, 2)]
    own = set(entries)
    # Written in one step, as the admin verbs do one at a time.
    index = blocks.index_members(own, ())
    assert scripts.set_blocks(r, K, own_read=(), copy_read=(), own=own, copy=(), index=index) == 1
    for n in (0, 1, 2, 3, 3998, 3999):
        expected = 403 if n % 2 == 0 else 200
        assert claim(engine, "alice", f"100.{n // 256}.{n % 256}.9") == expected
    for n in (0, 1, 998, 999):
        expected = 403 if n % 2 == 0 else 200
        assert claim(engine, "alice", f"2001:db8:{n:x}::9") == expected


# -- the write script: checked before its first write -------------------------------------------


def test_set_blocks_changes_nothing_when_the_blocks_moved_since_the_read(project, r, ctx):
    limit_verbs.block(ctx, "name:mallory", P)
    before = (r.smembers(K.blocked), r.zrange(K.blocked_index, 0, -1))
    keys = (K.settings, K.blocked, K.blocked_global, K.blocked_index)
    stale = ("name:trudy",)  # not what the set holds
    new = ("name:trudy", "name:eve")
    index = blocks.index_members(new, ())
    assert scripts.set_blocks(r, K, own_read=stale, copy_read=(), own=new, copy=(), index=index) == 0
    assert scripts.set_blocks(r, K, own_read=(), copy_read=(), own=new, copy=(), index=index) == 0
    assert (r.smembers(K.blocked), r.zrange(K.blocked_index, 0, -1)) == before
    ghost = ProjectKeys("ghost")
    ghost_write = {"own_read": (), "copy_read": (), "own": ("name:eve",), "copy": (), "index": ("pn:eve",)}
    assert scripts.set_blocks(r, ghost, **ghost_write) == scripts.set_blocks.codes.UNKNOWN_PROJECT
    assert not r.exists(ghost.blocked, ghost.blocked_index)
    # ARGV no caller sends: a count that is not a number, more entries counted than sent.
    with pytest.raises(scripts.ScriptError, match="counts"):
        scripts.set_blocks.send(r, keys, ("x", 0, 0, 0))
    with pytest.raises(scripts.ScriptError, match="fewer entries"):
        scripts.set_blocks.send(r, keys, (1, 0, 0, 0))
    assert (r.smembers(K.blocked), r.zrange(K.blocked_index, 0, -1)) == before


def test_blocking_in_an_unknown_project_is_refused(r, ctx):
    with pytest.raises(AdminError, match="unknown project"):
        limit_verbs.block(ctx, "name:mallory", "ghost")
    assert not r.keys("{ghost}*")


def test_reindex_splits_an_older_trackers_mixed_set(project, engine, r, ctx):
    # Before the split, global entries were copied into the project's own set and the claim
    # script matched the set itself: no index, no copy.
    r.sadd(GLOBAL_BLOCKED, "name:mallory")
    r.sadd(K.blocked, "name:mallory", "name:trudy", "ip:203.0.113.9", "ip:garbage")
    r.delete(K.blocked_index, K.blocked_global)
    assert limit_verbs.reindex_blocks(ctx) == {"projects": 1}
    assert r.smembers(K.blocked) == {"name:trudy", "ip:203.0.113.9", "ip:garbage"}
    assert r.smembers(K.blocked_global) == {"name:mallory"}
    assert claim(engine, "trudy") == 403 and claim(engine, "mallory") == 403
    assert claim(engine, ip="203.0.113.9") == 403 and claim(engine) == 200
    limit_verbs.block(ctx, "name:mallory", remove=True)
    assert claim(engine, "mallory") == 200


def test_maintain_indexes_the_blocks_of_an_older_tracker(project, admin, engine, redis_url, r, tmp_path, ctx):
    # An upgraded Redis holds blocks but no index: they must be enforced without an admin's
    # `tracker block --reindex`, so `tracker maintain` builds the missing index when it starts.
    r.sadd(GLOBAL_BLOCKED, "name:mallory")
    r.sadd(K.blocked, "name:mallory", "ip:203.0.113.0/24")
    r.delete(K.blocked_index, K.blocked_global)
    assert claim(engine, "mallory") == 200
    res = CliRunner().invoke(
        main, ["--redis-url", redis_url, "maintain", "--once", "--segments-dir", str(tmp_path)]
    )
    assert res.exit_code == 0, res.output
    assert claim(engine, "mallory") == 403 and claim(engine, ip="203.0.113.77") == 403
    assert r.smembers(K.blocked_global) == {"name:mallory"}
    assert limit_verbs.reindex_blocks_if_missing(ctx) == {"projects": 0}  # done once, not on every start


def test_deleting_a_project_removes_its_blocks(project, admin, r, ctx):

    limit_verbs.block(ctx, "ip:10.0.0.0/8", P)
    limit_verbs.block(ctx, "name:mallory")
    project_verbs.delete(ctx, P)
    assert not r.exists(K.blocked, K.blocked_global, K.blocked_index)
    assert r.smembers(GLOBAL_BLOCKED) == {"name:mallory"}


# -- through HTTP, the admin API and the CLI ----------------------------------------------------


def test_a_cidr_block_answers_403_through_a_trusted_proxy(project, engine, r, ctx):
    web = testing.TestClient(create_app(engine, config=AppConfig(trust_forwarded=True)))
    limit_verbs.block(ctx, "ip:203.0.113.0/24", P)

    def request(forwarded):
        return web.simulate_post(
            f"/{P}/request",
            body=orjson.dumps({"downloader": "alice", "api_version": "2"}),
            remote_addr="10.0.0.5",
            headers={"Content-Type": "application/json", "X-Forwarded-For": forwarded},
        )

    res = request("203.0.113.200")
    assert res.status_code == 403 and res.content == b"" and r.hlen(K.claims) == 0
    assert request("10.9.9.9, 203.0.113.200").status_code == 403  # a spoof in front
    assert request("203.0.114.1").status_code == 200


def test_admin_api_normalises_and_refuses_entries(project, admin, engine, r):
    from tracker_core.access import tokens

    web = testing.TestClient(create_app(engine))
    token = tokens.create(r, "*")[0]

    def post(path, body):
        return web.simulate_post(
            path,
            body=json.dumps(body),
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        )

    res = post(f"/api/admin/projects/{P}/blocks", {"entry": "ip:2001:DB8::/32"})
    assert res.status_code == 200 and res.json == {"entry": "ip:2001:db8::/32", "blocked": True}
    res = post(f"/api/admin/projects/{P}/blocks", {"entry": "ip:10.0.0.1/8"})
    assert res.status_code == 400 and "did you mean 10.0.0.0/8?" in res.text
    assert res.text.count("\n") == 1
    res = post("/api/admin/blocks", {"entry": "ip:2001:db8::/32"})
    assert res.status_code == 200
    res = post("/api/admin/blocks", {"entry": "ip:2001:db8::/32", "remove": True})
    assert res.status_code == 200
    assert claim(engine, "alice", "2001:db8::5") == 403  # the project's own
    shown = web.simulate_get(f"/api/admin/projects/{P}", headers={"Authorization": f"Bearer {token}"}).json
    assert shown["blocked"] == ["ip:2001:db8::/32"] and shown["blocked_global"] == []


def test_cli_blocks_lists_and_reindexes(project, engine, redis_url, r):
    runner = CliRunner()

    def cli(*args):
        return runner.invoke(main, ["--redis-url", redis_url, *args])

    res = cli("block", "ip:10.0.0.0/8", "--project", P)
    assert res.exit_code == 0 and res.output == "blocked ip:10.0.0.0/8\n"
    assert cli("block", "ip:::ffff:192.0.2.1").output == "blocked ip:192.0.2.1\n"
    res = cli("block", "ip:10.0.0.1/8")
    assert res.exit_code == 1 and "did you mean 10.0.0.0/8?" in res.output
    listed = json.loads(cli("block", "--list", "--project", P, "--json").output)
    assert listed == {
        "project": P,
        "blocked": ["ip:10.0.0.0/8"],
        "blocked_global": ["ip:192.0.2.1"],
        "ignore_global_blocked": False,
    }
    assert json.loads(cli("block", "--list", "--json").output) == {"global": ["ip:192.0.2.1"]}
    assert cli("block", "--reindex").output == "reindexed the blocks of 1 projects\n"
    assert claim(engine, "alice", "10.3.3.3") == 403 and claim(engine, "alice", "192.0.2.1") == 403
    assert cli("block").exit_code == 2
    assert cli("block", "name:mallory", "--list").exit_code == 2


@pytest.fixture
def ctx(redis_url):
    return AdminContext.from_url(redis_url)
