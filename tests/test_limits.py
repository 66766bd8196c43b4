"""Pattern limits: stored in Redis, listed, replaced, removed; each change reaches every node."""
import json

import pytest
import redis
from click.testing import CliRunner

from tracker_api.cli import main
from tracker_core import keys as keyspace
from tracker_core import limits
from tracker_core.admin import AdminError
from tracker_core.engine import Engine

P = "lim"


@pytest.fixture
def project(admin):
    admin.create_project(P)
    return P


@pytest.fixture
def cli(redis_url):
    runner = CliRunner()
    return lambda *args: runner.invoke(main, ["--redis-url", redis_url, *args])


def _age(r):
    return int(r.hget(keyspace.ProjectKeys(P).settings, "settings_age"))


def test_add_list_replace_remove(project, admin, r):
    start = _age(r)
    assert admin.add_limit(P, "users", "type:user", "10/s") == start + 1
    assert admin.add_limit(P, "cdn", "domain:*.Example.COM", "30/m") == start + 2
    assert admin.limits(P) == [
        {"name": "users", "pattern": "type:user", "rate": "10/s", "rate_per_s": 10.0, "seq": 1},
        {"name": "cdn", "pattern": "domain:example.com", "rate": "30/m", "rate_per_s": 0.5,
         "seq": 2}]
    # Replacing keeps the limit's place in the classification order.
    admin.add_limit(P, "users", "prefix:user:", "2.5")
    assert [(x["name"], x["pattern"], x["rate_per_s"]) for x in admin.limits(P)] == [
        ("users", "prefix:user:", 2.5), ("cdn", "domain:example.com", 0.5)]
    assert admin.remove_limit(P, "users") == start + 4
    assert [x["name"] for x in admin.limits(P)] == ["cdn"]
    assert r.hkeys(keyspace.ProjectKeys(P).limits) == ["cdn"]


@pytest.mark.parametrize("name,pattern,rate,reason", [
    ("Bad Name", "type:user", "1/s", "bad limit name"),
    ("ok", "user", "1/s", "pattern must start with"),
    ("ok", "regex:(", "1/s", "bad regular expression"),
    ("ok", "domain:a.com/x", "1/s", "domain is a host name"),
    ("ok", "type:user", "0/s", "bad rate"),
    ("ok", "type:user", "5/h", "bad rate"),
    ("ok", "type:user", "-1", "bad rate"),
    ("ok", "type:user", "2000000/s", "bad rate"),
])
def test_bad_limits_are_refused_and_change_nothing(project, admin, r, name, pattern, rate, reason):
    before = _age(r)
    with pytest.raises(AdminError, match=reason):
        admin.add_limit(P, name, pattern, rate)
    assert _age(r) == before
    assert admin.limits(P) == []


def test_unknown_project_and_unknown_limit(project, admin, r):
    with pytest.raises(AdminError, match="unknown project"):
        admin.add_limit("nope", "x", "type:user", "1/s")
    before = _age(r)
    with pytest.raises(AdminError, match="unknown limit"):
        admin.remove_limit(P, "ghost")
    assert _age(r) == before
    assert not r.exists("{nope}:limits")


def test_limit_count_is_capped(project, admin, r, monkeypatch):
    monkeypatch.setattr(limits, "MAX_LIMITS", 2)
    admin.add_limit(P, "a", "type:a", "1/s")
    admin.add_limit(P, "b", "type:b", "1/s")
    admin.add_limit(P, "a", "type:aa", "1/s")  # a replacement is not a new limit
    with pytest.raises(AdminError, match="too many limits"):
        admin.add_limit(P, "c", "type:c", "1/s")
    assert [x["name"] for x in admin.limits(P)] == ["a", "b"]


def test_a_change_is_published_and_every_node_reloads(project, admin, redis_url, r):
    node1, node2 = Engine(redis_url), Engine(redis_url)
    admin.add_items(P, ["user:alice", "page:1"])
    assert node1.limits(P).name_of("user:alice") is None
    assert node2.limits(P).name_of("user:alice") is None
    pubsub = redis.Redis.from_url(redis_url, decode_responses=True).pubsub()
    pubsub.subscribe(keyspace.SETTINGS_CHANNEL)
    pubsub.get_message(timeout=1)
    age = admin.add_limit(P, "users", "type:user", "1/s")
    message = pubsub.get_message(timeout=2)
    assert message and message["data"] == f"{P} {age}"
    pubsub.close()
    # Each node learns the new age from its next claim's reply, then reloads the pattern set.
    for node in (node1, node2):
        node.claim(P, "someone", "127.0.0.1", 1)
        assert node.limits(P).name_of("user:alice") == "users"
        assert node.limits(P).name_of("page:1") is None


def test_cli_limit_commands(project, cli, admin):
    res = cli("limit", "add", P, "users", "type:user", "10/m")
    assert res.exit_code == 0, res.output
    assert "limit users of lim set" in res.output
    res = cli("limit", "list", P)
    assert res.exit_code == 0
    assert [(x["name"], x["rate"]) for x in json.loads(res.output)] == [("users", "10/m")]
    bad = cli("limit", "add", P, "x", "nokind", "1/s")
    assert bad.exit_code == 2 and "pattern must start with" in bad.output
    bad = cli("limit", "remove", P, "ghost")
    assert bad.exit_code == 2 and "unknown limit" in bad.output
    assert cli("limit", "remove", P, "users").exit_code == 0
    assert admin.limits(P) == []
    assert cli("limit", "list", "nope").exit_code == 2
