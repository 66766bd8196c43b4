"""The `tracker` command against a real Redis."""

import json
import os
import signal
import subprocess

import orjson
import pytest
from click.testing import CliRunner

from support.processes import run_argv, run_ports, wait_for_port
from tracker_api.cli import main


def test_project_lifecycle(cli, r):
    assert cli("project", "create", "p1", "--title", "Project one").exit_code == 0
    again = cli("project", "create", "p1")
    assert again.exit_code == 1 and "already exists" in again.output
    res = cli("project", "set", "p1", "rate_limit=120", "min_version=20240101.01", "paused=yes")
    assert res.exit_code == 0, res.output
    shown = json.loads(cli("project", "show", "p1", "--json").output)
    assert shown["settings"]["rate_limit"] == "120" and shown["settings"]["paused"] == "1"
    assert shown["settings"]["title"] == "Project one"
    assert cli("project", "list").output.split() == ["p1"]


@pytest.mark.parametrize(
    "args,message,code",
    [
        (("project", "set", "p1", "rate_limit=-1"), "rate_limit", 1),
        (("project", "set", "p1", "nonsense=1"), "unknown setting", 1),
        (("project", "set", "p1", "rate_limit"), "KEY=VALUE", 2),
        (("project", "set", "nope", "paused=1"), "unknown project", 1),
        (("project", "create", "Bad Name"), "bad project name", 1),
        (("project", "show", "nope"), "unknown project", 1),
        (("status", "nope"), "unknown project", 1),
        (("items", "add", "p1", "-", "--queue", "elsewhere"), "unknown queue", 1),
        (("block", "1.2.3.4"), "ip:ADDRESS", 1),
        (("upload-target", "p1", "ftp://x/"), "bad upload target", 1),
    ],
)
def test_refusals_exit_1_and_usage_errors_2_with_a_reason(cli, r, args, message, code):
    """A command line that does not parse is a usage error (2, with the usage banner); what the
    tracker refuses is a failure (1, one line, no banner). Neither changes anything."""
    cli("project", "create", "p1")
    before = r.hgetall("{p1}:settings")
    res = cli(*args, input="a\n")
    assert res.exit_code == code and message in res.output, res.output
    assert ("Usage:" in res.output) == (code == 2)
    if code == 1:
        assert res.output.strip().count("\n") == 0, res.output  # one line
    assert r.hgetall("{p1}:settings") == before


def test_items_add_from_file_and_stdin_then_status(cli, tmp_path):
    cli("project", "create", "p1")
    path = tmp_path / "items.txt"
    path.write_text("".join(f"name{n}\n" for n in range(12000)) + "\n")
    res = cli("items", "add", "p1", str(path), "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.output.strip().splitlines()[-1]) == {"added": 12000, "duplicates": 0}
    res = cli("items", "add", "p1", "-", "--queue", "downloader:alice", "--json", input="name1\nnew1\nnew2\n")
    assert json.loads(res.output.strip().splitlines()[-1]) == {"added": 2, "duplicates": 1}
    status = json.loads(cli("status", "p1", "--json").output)
    assert status["queues"]["todo"] == 12000
    assert status["queues"]["downloader"] == {"alice": 2}
    assert status["todo_total"] == 12002 and status["out"] == 0 and status["done"] == 0


def test_block_and_upload_target(cli, r):
    cli("project", "create", "p1")
    assert cli("block", "name:mallory").exit_code == 0
    # A global block lives in each project's copy of the global list (tests/core/test_blocks.py).
    assert r.sismember("{p1}:blocked_global", "name:mallory")
    assert cli("block", "name:mallory", "--remove").exit_code == 0
    assert not r.sismember("{p1}:blocked_global", "name:mallory")
    assert cli("upload-target", "p1", "rsync://h/m/:downloader/").exit_code == 0
    assert r.hget("{p1}:upload_targets", "rsync://h/m/:downloader/") == "active"


@pytest.mark.slow
def test_run_demo_starts_embedded_redis_and_serves(tmp_path):
    """`tracker run --demo`: a private Redis under the data dir, the demo project, the API."""
    port, live_port = run_ports()
    env = {k: v for k, v in os.environ.items() if k != "TRACKER_REDIS_URL"}
    proc = subprocess.Popen(
        run_argv(["--data-dir", str(tmp_path / "var")], port, live_port, "--demo"),
        env=env,
        stdin=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, process=proc)
        import http.client

        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request(
            "POST", "/demo/multi=3//request", orjson.dumps({"downloader": "tester", "api_version": "2"})
        )
        res = conn.getresponse()
        assert res.status == 200
        assert len(orjson.loads(res.read())["item_name"].split("\0")) == 3
        assert (tmp_path / "var" / "redis" / "redis.sock").exists()
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
    # The embedded Redis was shut down with the tracker and kept its data in an AOF under var/.
    assert not (tmp_path / "var" / "redis" / "redis.sock").exists()
    assert any((tmp_path / "var" / "redis").glob("appendonlydir/*.aof"))


def test_items_for_a_queue_no_downloader_can_ask_for_are_refused(cli, r):
    assert cli("project", "create", "cliproj").exit_code == 0
    for queue in ("downloader:bad name", "downloader:x", "downloader:"):
        result = cli("items", "add", "cliproj", "-", "--queue", queue, input="a\nb\n")
        assert result.exit_code == 1 and "bad downloader name" in result.output, result.output
    assert not list(r.scan_iter("{cliproj}:todo:d*"))
    assert cli("items", "add", "cliproj", "-", "--queue", "downloader:alice", input="a\nb\n").exit_code == 0
    assert r.scard("{cliproj}:todo:d:alice") == 2


def test_every_cli_change_is_audited_as_cli(cli, r):
    def ok(*args, input=None):
        res = cli(*args, input=input)
        assert res.exit_code == 0, res.output
        return res.output

    ok("project", "create", "p1", "--title", "One")
    ok("project", "set", "p1", "rate_limit=60")
    ok("items", "add", "p1", "-", input="user:a\nuser:b\npage:c\n")
    ok("block", "name:mallory", "--project", "p1")
    ok("upload-target", "p1", "rsync://h/m/:downloader/")
    ok("limit", "add", "p1", "users", "type:user", "10/m")
    ok("limit", "reclassify", "p1")
    ok("limit", "remove", "p1", "users")
    secret = json.loads(ok("backfeed", "secret", "create", "p1", "--json"))
    ok("backfeed", "secret", "revoke", "p1", secret["id"])
    ok("backfeed", "shard-map", "p1", "s1", "secondary")
    ok("backfeed", "shard-map", "p1", "s1", "--remove")
    r.hset("{p1}:dead", "gone", json.dumps({"times_claimed": 3}))
    ok("dead", "requeue", "p1", "--all")
    ok("admin", "hq", "broadcast_message=hello")
    entries = json.loads(ok("admin", "audit", "--count", "100", "--json"))["entries"]
    assert [e["action"] for e in entries][::-1] == [
        "project.create",
        "project.settings",
        "items.add",
        "block.add",
        "upload_target",
        "limit.add",
        "limit.reclassify",
        "limit.remove",
        "backfeed_secret.create",
        "backfeed_secret.revoke",
        "backfeed_shard.map",
        "backfeed_shard.unmap",
        "dead.requeue",
        "hq.set",
    ]
    assert {e["actor"] for e in entries} == {"cli"}
    assert secret["secret"] not in json.dumps(entries)
    assert entries[-3]["detail"] == {"added": 3, "duplicates": 0, "queue": "todo"}
    # A project's own log has its changes only; pages continue with "next".
    mine = json.loads(ok("admin", "audit", "--project", "p1", "--count", "5", "--json"))
    assert len(mine["entries"]) == 5 and mine["entries"][0]["action"] == "dead.requeue"
    rest = json.loads(ok("admin", "audit", "--project", "p1", "--before", mine["next"], "--json"))
    assert len(rest["entries"]) == 8 and rest["next"] is None
    bad = cli("admin", "audit", "--before", "zzz")
    assert bad.exit_code == 1 and "bad 'before'" in bad.output


def test_admin_reads_match_the_api(cli, r):
    from tracker_core.access import tokens
    from tracker_core.warriors import hq

    text, record = tokens.create(r, "*", "ops")
    listed = json.loads(cli("admin", "token", "list", "--json").output)["tokens"]
    assert [t["token_id"] for t in listed] == [record.token_id] and text not in json.dumps(listed)
    warrior_id = hq.register(r, {"version": "3.2"}, "10.0.0.1")
    shown = json.loads(cli("admin", "warriors", "--json").output)
    assert shown["active_last_hour"] == 1 and shown["warriors"][0]["warrior_id"] == warrior_id
    res = cli("admin", "hq", "auto_project=p1", "seesaw_version=0.10.3")
    assert res.exit_code == 0, res.output
    assert r.hgetall("tracker:hq") == {"auto_project": "p1", "seesaw_version": "0.10.3"}
    for args, message, code in (
        (("admin", "hq", "nope=1"), "unknown HQ field", 1),
        (("admin", "hq", "broadcast_message"), "KEY=VALUE", 2),
        (("admin", "hq", "auto_project=Bad Name"), "project name", 1),
    ):
        res = cli(*args)
        assert res.exit_code == code and message in res.output, res.output
    assert r.hgetall("tracker:hq") == {"auto_project": "p1", "seesaw_version": "0.10.3"}


def test_cli_refuses_what_the_api_refuses(cli, r):
    cli("project", "create", "p1")
    res = cli("items", "add", "p1", "-", input="fine\n" + "x" * 5000 + "\n")
    assert res.exit_code == 1 and "item 2" in res.output
    assert r.scard("{p1}:todo") == 0
    res = cli("claims", "release", "p1", "--older-than", "1e308")
    assert res.exit_code == 1 and "older_than_s" in res.output
    res = cli("backfeed", "shard-map", "p1", "bad*shard", "todo")
    assert res.exit_code == 1 and "bad shard name" in res.output
    res = cli("backfeed", "secret", "revoke", "p1", "abc")
    assert res.exit_code == 1 and "bad secret id" in res.output
    assert not r.exists("{p1}:backfeed_shard_map")


def test_global_options_are_taken_after_the_command_too(redis_url, r):
    runner = CliRunner()
    assert runner.invoke(main, ["project", "create", "late", "--redis-url", redis_url]).exit_code == 0
    res = runner.invoke(main, ["status", f"--redis-url={redis_url}", "late", "--json"])
    assert res.exit_code == 0 and json.loads(res.output)["project"] == "late"
    assert r.sismember("tracker:projects", "late")
