"""Every item's story through the real server and the CLI (issue 27).

Item names are URLs (slashes, ?, %, #, +, spaces, up to 4 KB) put in every place an item can
be: each shared queue, a downloader's own queue, held by a limit, out (claimed once, reclaimed),
dead, done (over HTTP, then done again after a redo; one done entry archived to a log file, the
next in the stream), in a segment file of a queue, on its way to one, in a done segment, done and
discarded, and nowhere. Anonymous clients ask GET /P/items/NAME.json and never see an IP nor
anything read from disk; admins ask GET /api/admin/projects/P/item?name=NAME (and `tracker items
status`), which searches the segment files and the done log.
"""

from __future__ import annotations

import json
import shutil
import urllib.error
import urllib.parse
import urllib.request

import pytest
import zstandard
from click.testing import CliRunner

from support.processes import start_live_server, stop_live_server
from tracker_api.cli import main
from tracker_core import scripts
from tracker_core.access import tokens
from tracker_core.admin import item_verbs, limit_verbs, project_verbs
from tracker_core.keyspace import ADMIN_TOKENS_USED, ProjectKeys
from tracker_core.maintainer import maintenance
from tracker_core.offload import segment_registry
from tracker_core.offload.lease import Lease

P, VAULT, GONE = "story", "vault", "gone"
K = ProjectKeys(P)
T0_MS = 1_700_000_000_000  # the clock fixture's start
URLS = [
    "https://example.org/a b/c?d=%20e&f=1+2#frag",
    "http://user:pw@example.org:8080/%E2%98%BA/?q=a%2Fb#x y",
    "https://example.org/" + "seg%20ment/" * 360,  # about 4 KB
]
IPS = ("10.0.0.1", "10.0.0.2", "10.0.0.3", "127.0.0.1")
PUBLIC = ("status", "downloader", "queue", "limit", "claims", "reason", "since", "segment", "maybe")

pytestmark = pytest.mark.slow


def public(**fields) -> dict:
    return {**dict.fromkeys(PUBLIC), "maybe": [], **fields}


def http(server, method: str, path: str, body=None, token: str | None = None):
    """(status, body text) of one request to the real server."""
    data = None if body is None else json.dumps(body).encode()
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    request = urllib.request.Request(server.base + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as res:
            return res.status, res.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def anonymous(server, name: str, project: str = P) -> dict:
    status, text = http(server, "GET", f"/{project}/items/{urllib.parse.quote(name, safe='')}.json")
    assert status == 200, text
    assert not any(ip in text for ip in IPS), text  # never an IP to anyone
    return json.loads(text)


def story(server, token: str, name: str, project: str = P) -> dict:
    query = urllib.parse.urlencode({"name": name})  # a space as +, a + as %2B
    status, text = http(server, "GET", f"/api/admin/projects/{project}/item?{query}", token=token)
    assert status == 200, text
    return json.loads(text)


def claim_over_http(server, downloader: str, count: int, project: str = P) -> list[str]:
    body = {"downloader": downloader, "api_version": "2", "version": "1.0"}
    status, text = http(server, "POST", f"/{project}/multi={count}/request", body)
    assert status == 200, text
    return json.loads(text)["item_name"].split("\0")


def done_over_http(server, downloader: str, names: list[str], size: int, project: str = P) -> None:
    body = {
        "downloader": downloader,
        "version": "1.0",
        "item": "\0".join(names),
        "bytes": {"example.org": size},
    }
    status, text = http(server, "POST", f"/{project}/done", body)
    assert (status, text) == (200, "OK")


@pytest.fixture
def segdir(tmp_path):
    return tmp_path / "segments"


@pytest.fixture
def server(redis_url, segdir):
    live = start_live_server(redis_url, workers=1, extra_env={"TRACKER_SEGMENTS_DIR": str(segdir)})
    yield live
    stop_live_server(live)


@pytest.fixture
def token(admin):
    return tokens.create(admin.conn, "*", "story test")[0]


def names_for(tag: str) -> list[str]:
    return [f"{u}&{tag}" for u in URLS]


@pytest.fixture
def world(admin, engine, clock, r, server, segdir):
    """Put names in every place of project P (and of VAULT, GONE); return what to expect."""
    project_verbs.create(admin, P, {"reclaim_ttl_s": "60", "max_reclaims": "1", "log_maxlen": "1"})
    w = {}
    # Out: claimed by alice, one reclaimed by bob.
    item_verbs.add(admin, P, names_for("out"))
    _, out = engine.claim(P, "alice", "10.0.0.1", len(URLS))
    clock.advance(61)
    _, (again,) = engine.claim(P, "bob", "10.0.0.2", 1)
    w["reclaimed"] = again
    w["out"] = [n for n in out if n != again]
    # Dead: bob's reclaimed claim comes due again, past max_reclaims (the others go to carol).
    clock.advance(121)
    engine.claim(P, "carol", "10.0.0.3", len(URLS))
    assert r.hexists(K.dead, again)
    # Done over HTTP (IP 127.0.0.1), three names in one entry; then redone and done again.
    item_verbs.add(admin, P, names_for("done"))
    done = claim_over_http(server, "erin", len(URLS))
    done_over_http(server, "erin", done, 3000)
    w["done"] = sorted(done)
    item_verbs.redo(admin, P, names=[w["done"][0]], queue="todo")
    assert claim_over_http(server, "frank", 1) == [w["done"][0]]
    done_over_http(server, "frank", [w["done"][0]], 700)
    # The first done entry is archived to a log file (log_maxlen 1); the second stays in Redis.
    assert maintenance.maintain_project(r, P, segdir)["log_archived"] == 1
    # Each shared queue and a downloader's own queue; held by a limit.
    for queue in ("todo", "secondary", "redo", "downloader:dave"):
        item_verbs.add(admin, P, names_for(queue), queue=queue)
    limit_verbs.add(admin, P, "held", "regex:&held", "1/m")
    item_verbs.add(admin, P, names_for("held"))
    # In segment files: backfeed past offload_high goes to disk, 5 names a file.
    disk = [f"{URLS[i % 3]}&disk={i}" for i in range(20)]
    item_verbs.add(admin, P, disk, queue="backfeed")
    project_verbs.set_settings(
        admin, P, {"offload_high": "10", "offload_low": "5", "offload_segment_items": "5"}
    )
    assert maintenance.maintain_project(r, P, segdir)["offloaded"] == 10
    w["disk"] = sorted(set(disk) - r.smembers(K.backfeed))
    w["backfeed"] = sorted(r.smembers(K.backfeed))
    # On its way to a segment file: staged from secondary by a maintainer (not yet committed).
    lease = Lease(r, K, "node-a")
    assert lease.take()
    reply = scripts.offload_stage(
        r, K, holder=lease.holder, count=1, source="secondary", source_key=K.secondary
    )
    w["staged_number"], (w["staged"],) = reply.code, reply.items
    # Done items offloaded to a segment (VAULT), and done items only counted (GONE).
    project_verbs.create(admin, VAULT, {"done_mode": "offload", "done_offload_high": "1"})
    item_verbs.add(admin, VAULT, names_for("vault"))
    _, vaulted = engine.claim(VAULT, "hana", "10.0.0.1", len(URLS))
    assert engine.done(VAULT, "hana", "1", vaulted, ["example.org", 900], "id").new == len(URLS)
    assert maintenance.maintain_project(r, VAULT, segdir)["done_offloaded"] == len(URLS) - 1
    w["vaulted"] = sorted(set(vaulted) - r.smembers(ProjectKeys(VAULT).done))
    project_verbs.create(admin, GONE, {"done_mode": "discard"})
    item_verbs.add(admin, GONE, names_for("gone"))
    _, gone = engine.claim(GONE, "ivan", "10.0.0.1", len(URLS))
    assert engine.done(GONE, "ivan", "1", gone, ["example.org", 300], "id").new == len(URLS)
    w["gone"] = gone
    return w


def test_every_place_an_item_can_be_for_anonymous_clients_and_admins(server, token, world, segdir, r):
    w = world
    # Out: who and since when; the IP and the earlier round only to admins.
    for name in w["out"]:
        assert anonymous(server, name) == public(
            status="out", downloader="carol", claims=2, since=T0_MS + 182_000
        )
        told = story(server, token, name)
        assert (told["ip"], [r["downloader"] for r in told["rounds"]]) == ("10.0.0.3", ["alice"])
        assert told["rounds"][0] == {"downloader": "alice", "ip": "10.0.0.1", "claimed_ms": T0_MS}
    # Dead: its history.
    dead = w["reclaimed"]
    assert anonymous(server, dead) == public(
        status="dead", downloader="bob", claims=2, reason="reclaimed too often", since=T0_MS + 182_000
    )
    told = story(server, token, dead)
    assert told["ip"] == "10.0.0.2"
    assert [(r["downloader"], r["ip"]) for r in told["rounds"]] == [
        ("alice", "10.0.0.1"),
        ("bob", "10.0.0.2"),
    ]
    # Done: anonymous clients learn it is done; admins who, when, how many bytes, every time.
    for name in w["done"]:
        assert anonymous(server, name) == public(status="done")
        told = story(server, token, name)
        assert told["status"] == "done"
        first = told["done"][0]
        assert (first["downloader"], first["ip"], first["bytes"], first["entry_items"]) == (
            "erin",
            "127.0.0.1",
            3000,
            len(URLS),
        )
        assert first["at"] > T0_MS and first["version"] == "1.0"
    twice = story(server, token, w["done"][0])["done"]
    assert [(d["downloader"], d["bytes"], d["entry_items"]) for d in twice] == [
        ("erin", 3000, 3),
        ("frank", 700, 1),
    ]
    assert twice[0]["at"] <= twice[1]["at"]
    # Waiting in a queue, and held by a limit (admins see its rule).
    for queue in ("todo", "secondary", "redo", "downloader:dave"):
        for name in names_for(queue):
            if name != w["staged"]:
                assert anonymous(server, name) == public(status="todo", queue=queue)
    for name in w["backfeed"]:
        assert anonymous(server, name) == public(status="todo", queue="backfeed")
    for name in names_for("held"):
        assert anonymous(server, name) == public(status="todo", queue="limited", limit="held")
        assert story(server, token, name)["limit_rule"]["pattern"] == "regex:&held"
    # On its way to a segment file: its number and the queue it returns to, for anyone.
    staged = public(status="offloaded", queue="secondary", segment=w["staged_number"])
    assert anonymous(server, w["staged"]) == staged
    # In a segment file: anonymous clients get "maybe" (no file is opened for them); admins
    # get the segment and the queue it returns to.
    sources = segment_registry.segment_sources(r, K)
    for name in w["disk"]:
        assert anonymous(server, name) == public(maybe=["offloaded"])
        told = story(server, token, name)
        assert (told["status"], told["queue"], told["maybe"], told["unread"]) == (
            "offloaded",
            "backfeed",
            [],
            [],
        )
        assert sources[told["segment"]] == "backfeed"
        assert name.encode() in zstd_names(segdir / P / f"{told['segment']}.zst")
    # A done item in a done segment, and a done item of done_mode=discard.
    for name in w["vaulted"]:
        told = story(server, token, name, VAULT)
        assert (told["status"], told["queue"]) == ("offloaded", "done")
        assert [d["downloader"] for d in told["done"]] == ["hana"]
    for name in w["gone"]:
        assert anonymous(server, name, GONE) == public()  # never ?maybe: GONE has no segments
        told = story(server, token, name, GONE)
        assert (told["status"], [d["downloader"] for d in told["done"]]) == ("done", ["ivan"])
    # Nowhere: not in any file, never done, never seen by the filter.
    for name in names_for("never"):
        assert anonymous(server, name) == public(maybe=["offloaded"])
        told = story(server, token, name)
        assert (told["status"], told["maybe"], told["done"], told["seen"]) == (None, [], [], False)


def zstd_names(path) -> bytes:
    with open(path, "rb") as f:
        return zstandard.ZstdDecompressor().stream_reader(f).read()


@pytest.fixture
def cli(redis_url, segdir):
    runner = CliRunner()  # stdout and stderr apart (Click 8.2)

    def invoke(*args):
        return runner.invoke(main, ["--redis-url", redis_url, *args, "--segments-dir", str(segdir)])

    return invoke


def test_the_cli_tells_the_same_story_and_exports_an_items_log(server, token, world, cli, r):
    w = world
    names = [w["out"][0], w["reclaimed"], w["done"][0], w["disk"][0], w["staged"], names_for("never")[2]]
    res = cli("items", "status", P, *names, "--json")
    assert res.exit_code == 0, res.stdout
    told = [json.loads(line) for line in res.stdout.splitlines()]
    assert told == [{"item": n, **story(server, token, n)} for n in names]
    res = cli("items", "status", P, *names)
    assert res.exit_code == 0, res.stdout
    rows = res.stdout.splitlines()
    assert rows[0].split() == ["STATUS", "DETAIL", "DOWNLOADER", "CLAIMS", "DONE", "ITEM"]
    assert rows[3].startswith("done") and "frank," in rows[3] and ",700B (+1)" in rows[3]
    assert rows[4].split()[:3] == ["offloaded", "segment", str(told[3]["segment"])]
    assert "10.0.0." not in res.stdout  # the table leaves IPs to --json
    # The log export of one item: its two done entries, one from a log file, one from Redis.
    res = cli("log", "export", P, "--item", w["done"][0])
    assert res.exit_code == 0, res.stderr
    entries = [json.loads(line) for line in res.stdout.splitlines()]
    assert [e["entry"] for e in entries] == [d["entry"] for d in told[2]["done"]]
    assert all(w["done"][0] in e["items"] for e in entries) and len(entries) == 2
    res = cli("log", "export", P, "--item", w["done"][1])
    assert [json.loads(line)["downloader"] for line in res.stdout.splitlines()] == ["erin"]
    assert cli("log", "export", P, "--item", names_for("never")[0]).stdout == ""


def test_the_admin_api_log_filters_by_item(server, token, world):
    name = world["done"][0]
    query = urllib.parse.urlencode({"item": name})
    status, text = http(server, "GET", f"/api/admin/projects/{P}/log?{query}", token=token)
    assert status == 200, text
    page = json.loads(text)
    assert [e["downloader"] for e in page["entries"]] == ["erin", "frank"] and page["cursor"] is None
    assert all(name in e["items"] for e in page["entries"])


def test_malformed_lookups_are_refused_with_one_line_and_change_nothing(server, token, world, cli, r):
    before = {key: r.dump(key) for key in r.scan_iter("*")}
    refused_before = int(r.hget(K.stats, "admin_bad_request") or 0)
    for query in ("", "name=", "name=" + "x" * 4097, "name=a%00b", "name=a&name=b", "nope=1"):
        status, text = http(server, "GET", f"/api/admin/projects/{P}/item?{query}", token=token)
        assert status == 400 and text.count("\n") == 1, (query, status, text)
    status, _ = http(server, "GET", "/api/admin/projects/nope/item?name=x", token=token)
    assert status == 404
    status, _ = http(server, "GET", f"/api/admin/projects/{P}/item?name=x")
    assert status == 401
    status, _ = http(server, "GET", f"/api/admin/projects/{P}/log?item=" + "x" * 4097, token=token)
    assert status == 400
    assert http(server, "GET", f"/{P}/items/{'x' * 4097}.json")[0] == 400
    res = cli("items", "status", P, "x" * 4097)
    assert res.exit_code == 1 and "4096" in res.stderr
    res = cli("log", "export", P, "--item", "a\0b")
    assert res.exit_code == 1 and res.stderr.count("\n") == 1
    after = {key: r.dump(key) for key in r.scan_iter("*")}
    changed = {key for key in set(before) | set(after) if before.get(key) != after.get(key)}
    # Only the refusals' counters, and the token's last use (a refused lookup still used it).
    assert changed <= {"tracker:stats", K.stats, ADMIN_TOKENS_USED}
    assert int(r.hget(K.stats, "admin_bad_request")) - refused_before == 7  # six lookups, one log page


def test_a_node_without_the_segment_files_says_what_it_could_not_read(server, token, world, segdir):
    """Anonymous answers never read the disk, so they stay the same; an admin's says what it
    could not read and keeps "maybe"."""
    w = world
    asked = [w["disk"][0], w["done"][1], names_for("never")[0]]
    before = [anonymous(server, n) for n in asked]
    shutil.move(segdir, segdir.with_name("elsewhere"))
    try:
        assert [anonymous(server, n) for n in asked] == before
        told = story(server, token, w["disk"][0])
        assert (told["status"], told["maybe"]) == (None, ["offloaded"])
        assert any(line.startswith("segment ") for line in told["unread"])
        assert any("log segment" in line for line in told["unread"])
    finally:
        shutil.move(segdir.with_name("elsewhere"), segdir)
    assert story(server, token, w["disk"][0])["unread"] == []
