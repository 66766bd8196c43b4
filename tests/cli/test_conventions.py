"""The conventions every `tracker` command follows: exit codes, one-line errors, -h, --version,
--json, TRACKER_... environment variables, help text."""

import json
import os
import re
import socket
import subprocess
from importlib import metadata

import click
import pytest
from click.testing import CliRunner

from support.paths import TRACKER_BIN
from tracker_api.cli import main
from tracker_core.infra.embedded import free_port

P = "conv-p"
NAMES = ["http://example.com/a b?x=1%20#frag", "user:alice", "page/2"]
# Commands that run a process and print only log lines to stderr: no --json for them.
PROCESS_COMMANDS = {("run",), ("serve",), ("live",)}


def leaf_commands(group=main, path=()):
    """Every command of the tree with its path: (("project", "create"), command), ..."""
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            yield (*path, name), command
            yield from leaf_commands(command, (*path, name))
        else:
            yield (*path, name), command


ALL = [((), main), *leaf_commands()]
LEAVES = [(path, c) for path, c in ALL if path and not isinstance(c, click.Group)]


def test_the_tree_has_every_command_it_had():
    names = {" ".join(path) for path, _ in ALL if path}
    assert names >= {
        "run", "serve", "live", "maintain", "status", "block", "upload-target",
        "project create", "project set", "project show", "project list", "project settings",
        "project pause", "project resume", "project delete",
        "items add", "items redo", "items status",
        "queue count", "queue sample", "queue clear", "queue move",
        "claims list", "claims release",
        "limit add", "limit remove", "limit list", "limit reclassify",
        "dead list", "dead requeue",
        "backfeed secret create", "backfeed secret list", "backfeed secret revoke",
        "backfeed shard-map", "backfeed filter",
        "segments list", "segments export", "segments import",
        "log export", "log status",
        "admin audit", "admin warriors", "admin hq",
        "admin token create", "admin token list", "admin token revoke",
        "webhook add", "webhook list", "webhook remove",
    }  # fmt: skip


@pytest.mark.parametrize("path,command", ALL, ids=lambda v: " ".join(v) if isinstance(v, tuple) else "")
def test_every_command_has_help_h_version_and_env_vars(path, command):
    assert (command.help or "").strip(), f"{path} has no help"
    for param in command.params:
        if isinstance(param, click.Option):
            assert (param.help or "").strip(), f"{path} {param.opts} has no help"
    runner = CliRunner()
    for flag in ("-h", "--help"):
        res = runner.invoke(main, [*path, flag])
        assert res.exit_code == 0 and res.output.startswith("Usage: "), res.output
    shown = runner.invoke(main, [*path, "-h"]).output
    options = [p for p in command.params if isinstance(p, click.Option) and p.name != "version"]
    # Every option's environment variable is named in the help (click wraps long lines).
    assert len(re.findall(r"env\s+var:\s+TRACKER_", shown)) >= len(options), shown
    res = runner.invoke(main, [*path, "--version"])
    assert res.exit_code == 0 and res.output == f"tracker {metadata.version('tracker')}\n"


@pytest.mark.parametrize("path,command", LEAVES, ids=lambda v: " ".join(v) if isinstance(v, tuple) else "")
def test_every_command_that_prints_takes_json(path, command):
    takes_json = any("--json" in p.opts for p in command.params)
    assert takes_json == (path not in PROCESS_COMMANDS)


def test_a_usage_error_exits_2_with_the_banner_and_a_failure_1_without(cli):
    for args in (
        ("project", "create"),
        ("status", P, "--no-such-option"),
        ("queue", "sample", P, "todo", "--count", "0"),
    ):
        res = cli(*args)
        assert res.exit_code == 2 and "Usage: tracker" in res.output, res.output
    res = cli("status", P)
    assert res.exit_code == 1 and res.output == f"Error: unknown project {P!r}\n"
    assert isinstance(res.exception, SystemExit)  # handled, not an uncaught exception


def test_no_redis_is_one_actionable_line_with_the_password_hidden(tmp_path):
    port = free_port()  # nothing listens there once free_port has closed its probe
    url = f"redis://:hunter2secret@127.0.0.1:{port}/0"
    for args in (
        ["project", "list"],
        ["status", P],
        ["items", "status", P, NAMES[0]],
        ["project", "create", P],
    ):
        res = subprocess.run(
            [str(TRACKER_BIN), "--redis-url", url, *args], capture_output=True, text=True, timeout=60
        )
        assert res.returncode == 1, res
        assert res.stdout == ""
        warning, *lines = res.stderr.splitlines()
        # The password came on the command line: one line says how not to (cli/redis_secret.py).
        assert warning.startswith("Warning: the Redis password came on the command line"), warning
        assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
        assert lines[0].startswith("Error: no Redis at redis://") and lines[0].endswith(
            f"127.0.0.1:{port}/0: is `tracker run` running?"
        ), lines
        assert "hunter2secret" not in res.stderr
    # The embedded default names its socket under the data directory.
    res = subprocess.run(
        [str(TRACKER_BIN), "--data-dir", str(tmp_path / "var"), "project", "list"],
        capture_output=True,
        text=True,
        timeout=60,
        env={k: v for k, v in os.environ.items() if k != "TRACKER_REDIS_URL"},
    )
    assert res.returncode == 1
    assert (
        res.stderr
        == f"Error: no Redis at unix://{tmp_path}/var/redis/redis.sock: is `tracker run` running?\n"
    )


@pytest.fixture
def busy_port():
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield holder.getsockname()[1]


def _tracker(*args, timeout=60, **kwargs):
    return subprocess.run(
        [str(TRACKER_BIN), *args], capture_output=True, text=True, timeout=timeout, **kwargs
    )


def test_a_taken_port_is_one_line_and_nothing_is_started(redis_url, busy_port, tmp_path):
    res = _tracker("--redis-url", redis_url, "serve", "--port", str(busy_port), "--workers", "1")
    assert res.returncode == 1 and "Traceback" not in res.stderr, res.stderr
    assert res.stderr.splitlines()[-1] == (
        f"Error: port {busy_port} is in use on 127.0.0.1: stop what holds it (a tracker still "
        "running?) or choose another with --port"
    )
    res = _tracker("--redis-url", redis_url, "live", "--port", str(busy_port))
    assert res.returncode == 1 and "Traceback" not in res.stderr, res.stderr
    assert f"Error: port {busy_port} is in use" in res.stderr.splitlines()[-1]
    # tracker run checks its ports before it starts the embedded Redis.
    data = tmp_path / "var"
    env = {k: v for k, v in os.environ.items() if k != "TRACKER_REDIS_URL"}
    res = _tracker("--data-dir", str(data), "run", "--port", str(busy_port), env=env)
    assert res.returncode == 1 and res.stderr.count("\n") == 1, res.stderr
    assert f"port {busy_port} is in use" in res.stderr and "--port" in res.stderr
    res = _tracker(
        "--data-dir", str(data), "run", "--port", str(free_port()), "--live-port", str(busy_port), env=env
    )
    assert res.returncode == 1 and res.stderr.count("\n") == 1, res.stderr
    assert f"port {busy_port} is in use" in res.stderr and "--live-port" in res.stderr
    assert not (data / "redis").exists()


@pytest.fixture
def seeded(cli, r, tmp_path):
    """A project with items in todo, a claim, a dead item, a limit, a secret and a token."""
    assert cli("project", "create", P).exit_code == 0
    assert cli("items", "add", P, "-", input="\n".join(NAMES) + "\n").exit_code == 0
    r.hset(f"{{{P}}}:dead", "gone/1?x", json.dumps({"times_claimed": 3}))
    assert cli("limit", "add", P, "users", "type:user", "10/m").exit_code == 0
    return r


def _json_cases(tmp_path):
    segment = tmp_path / "nothing.seg"
    return [
        ("project", "create", "conv-other"),
        ("project", "grow", "conv-other", "--shards", "2"),
        ("project", "set", P, "rate_limit=60"),
        ("project", "show", P),
        ("project", "list"),
        ("project", "settings"),
        ("project", "pause", P),
        ("project", "resume", P),
        ("status", P),
        ("upload-target", P, "rsync://h/m/:downloader/"),
        ("block", "name:mallory", "--project", P),
        ("block", "--list"),
        ("block", "--reindex"),
        ("items", "redo", P, "--pattern", "*"),
        ("queue", "count", P, "todo"),
        ("queue", "sample", P, "todo"),
        ("queue", "move", P, "todo", "secondary", "--pattern", "page*"),
        ("claims", "list", P),
        ("claims", "release", P, "--pattern", "*"),
        ("limit", "list", P),
        ("limit", "reclassify", P),
        ("limit", "add", P, "pages", "prefix:page", "5/s"),
        ("limit", "remove", P, "pages"),
        ("dead", "requeue", P, "gone/1?x"),
        ("backfeed", "secret", "list", P),
        ("backfeed", "shard-map", P),
        ("backfeed", "shard-map", P, "s1", "secondary"),
        ("backfeed", "filter", P),
        ("segments", "list", P),
        ("log", "status", P),
        ("maintain", "--once", "--segments-dir", str(tmp_path / "segments")),
        ("backup", str(tmp_path / "backup"), "--segments-dir", str(tmp_path / "segments")),
        ("restore", str(tmp_path / "backup")),  # refused (Redis holds keys): a failure, no JSON
        ("admin", "audit"),
        ("admin", "warriors"),
        ("admin", "hq", "broadcast_message=hi"),
        ("admin", "token", "list"),
        ("webhook", "list"),
        ("queue", "clear", P, "secondary", "--yes"),
        ("project", "delete", "conv-other", "--yes"),
        ("segments", "export", P, "1", str(segment)),  # refused (no segment 1): a failure, no JSON
    ]


def _path(args) -> tuple:
    """The command ARGS run: the longest command path they start with."""
    paths = [p for p, _ in LEAVES if tuple(args[: len(p)]) == p]
    return max(paths, key=len)


def test_every_printing_command_prints_json_with_json(cli, seeded, engine, tmp_path):
    covered = set()
    for args in _json_cases(tmp_path):
        res = cli(*args, "--json")
        covered.add(_path(args))
        if args[:2] == ("segments", "export") or args[0] == "restore":
            assert res.exit_code == 1 and res.output.startswith("Error: "), res.output
            continue
        assert res.exit_code == 0, (args, res.output)
        json.loads(res.output)  # one JSON document
    # Streams: JSON lines, one object each.
    seeded.hset(f"{{{P}}}:dead", "again", json.dumps({"times_claimed": 4}))
    for args in (("dead", "list", P), ("items", "status", P, *NAMES)):
        res = cli(*args, "--json")
        covered.add(_path(args))
        assert res.exit_code == 0, res.output
        rows = [json.loads(line) for line in res.output.splitlines()]
        assert rows and all(isinstance(row, dict) for row in rows)
    assert [row["item"] for row in rows] == NAMES
    _, claimed = engine.claim(P, "alice", "10.0.0.1", 1)
    engine.done(P, "alice", "1", claimed, [], "")  # a line for the log to export
    res = cli("log", "export", P, "--json", "--segments-dir", str(tmp_path / "segments"))
    exported = res.output.splitlines()
    assert res.exit_code == 0 and exported, res.output
    assert all(isinstance(json.loads(line), dict) for line in exported)
    res = cli("items", "add", P, "-", "--json", input="one/more?x\n")
    assert json.loads(res.output.splitlines()[-1]) == {"added": 1, "duplicates": 0}
    res = cli("backfeed", "secret", "create", P, "--json")
    secret_id = json.loads(res.output)["id"]
    assert json.loads(cli("backfeed", "secret", "revoke", P, secret_id, "--json").output) == {
        "revoked": secret_id
    }
    token = json.loads(cli("admin", "token", "create", "--json").output)
    assert json.loads(cli("admin", "token", "revoke", token["token_id"], "--json").output) == {
        "revoked": token["token_id"]
    }
    hook = json.loads(cli("webhook", "add", "https://example.com/hook?x=1", "--json").output)
    assert json.loads(cli("webhook", "remove", hook["hook_id"], "--json").output) == {
        "removed": hook["hook_id"]
    }
    covered |= {
        ("webhook", "add"),
        ("webhook", "remove"),
        ("log", "export"),
        ("items", "add"),
        ("backfeed", "secret", "create"),
        ("backfeed", "secret", "revoke"),
        ("admin", "token", "create"),
        ("admin", "token", "revoke"),
        ("segments", "import"),  # prints like export: see tests/core/offload/test_offload.py
    }
    assert covered == {p for p, _ in LEAVES} - PROCESS_COMMANDS


def test_without_json_a_readable_table(cli, seeded):
    status = cli("status", P).output
    with pytest.raises(ValueError):
        json.loads(status)
    rows = dict(line.split(None, 1) for line in status.splitlines() if line.strip())
    assert rows["project"] == P and rows["queues.todo"] == str(seeded.scard(f"{{{P}}}:todo"))
    assert cli("project", "list").output == f"{P}\n"
    cli("admin", "token", "create", "--note", "ops team")
    listed = cli("admin", "token", "list").output.splitlines()
    assert listed[0].split() == ["TOKEN_ID", "SCOPE", "ACCESS", "CREATED", "EXPIRES", "LAST_USED", "NOTE"]
    assert listed[1].split()[1:3] == ["*", "read-write"] and listed[1].split()[4:] == [
        "never",
        "never",
        "ops",
        "team",
    ]
    # A list of names: one a line, whatever characters they hold.
    sample = cli("queue", "sample", P, "todo", "--count", "100").output.splitlines()
    assert sorted(sample) == sorted(seeded.smembers(f"{{{P}}}:todo")) and len(sample) >= 2
    # A name with control characters cannot break a table's lines.
    res = cli("items", "status", P, "evil\nname")
    assert res.exit_code == 0 and res.output.splitlines()[1].endswith("evil\\nname")


def test_json_for_every_command_from_the_environment(cli, seeded):
    res = cli("project", "show", P, env={"TRACKER_JSON": "1"})
    assert res.exit_code == 0 and json.loads(res.output)["settings"]["rate_limit"]


def test_an_environment_variable_sets_an_option(cli, seeded):
    res = cli(
        "items",
        "add",
        P,
        "-",
        "--json",
        input="queued/elsewhere?1\n",
        env={"TRACKER_ITEMS_ADD_QUEUE": "secondary"},
    )
    assert res.exit_code == 0, res.output
    assert seeded.smembers(f"{{{P}}}:todo:secondary") == {"queued/elsewhere?1"}
    res = cli("queue", "sample", P, "todo", "--json", env={"TRACKER_QUEUE_SAMPLE_COUNT": "1"})
    assert len(json.loads(res.output)["items"]) == 1
    # An explicit option wins over its environment variable.
    res = cli("queue", "sample", P, "todo", "--json", "--count", "2", env={"TRACKER_QUEUE_SAMPLE_COUNT": "1"})
    assert len(json.loads(res.output)["items"]) == 2
    # A bad value from the environment is a usage error, named as such.
    res = cli("queue", "sample", P, "todo", env={"TRACKER_QUEUE_SAMPLE_COUNT": "0"})
    assert res.exit_code == 2 and "--count" in res.output


def test_a_reader_that_stops_early_gets_no_traceback(redis_url, r):
    """click's own EPIPE handling (exit 1, nothing printed), kept by the error map passing it on."""
    for i in range(3000):
        # Long names: the listing (about 700 KB) must outgrow the pipe's buffer (64 KB), or the
        # command could finish writing before the reader closes and never see the broken pipe.
        name = f"https://example.com/{i}/{'segment/' * 25}?page={i}#x"
        r.hset("{conv-p}:dead", name, json.dumps({"times_claimed": 3}))
    r.hset("{conv-p}:settings", "settings_age", "1")
    process = subprocess.Popen(
        [str(TRACKER_BIN), "--redis-url", redis_url, "dead", "list", P, "--count", "3000"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    process.stdout.readline()
    process.stdout.close()  # like `| head -1`
    stderr = process.stderr.read()
    assert process.wait(timeout=60) == 1
    assert stderr == "", stderr
