"""The warrior registry's bounds come from the AppConfig (the CLI's options), never from the
environment of the process that serves."""

import click
import orjson
import pytest
from click.testing import CliRunner
from falcon import testing

from tracker_api.app import create_app
from tracker_api.cli import server_options
from tracker_api.web.config import AppConfig
from tracker_core import keyspace
from tracker_core.warriors import hq

JSON = {"Content-Type": "application/json"}


def register(web, ip):
    res = web.simulate_post(
        "/api/register.json",
        remote_addr=ip,
        headers=JSON,
        body=orjson.dumps({"warrior": {"version": "0.10.3"}}),
    )
    assert res.status_code == 200  # refused or not, a warrior always gets an id
    return res.json["warrior_id"]


def refused(r, field):
    return int(r.hget(keyspace.GLOBAL_STATS, field) or 0)


def test_the_registry_bounds_come_from_the_config(engine, r):
    web = testing.TestClient(create_app(engine, config=AppConfig(warriors_max=2, registrations_per_hour=1)))
    first = register(web, "198.51.100.1")
    throttled = register(web, "198.51.100.1")  # the same address again within the hour
    assert r.hexists(keyspace.WARRIORS, first) and not r.hexists(keyspace.WARRIORS, throttled)
    assert refused(r, "register_throttled") == 1
    second = register(web, "2001:db8:1:2::1")
    full = register(web, "2001:db8:1:3::1")
    assert r.hexists(keyspace.WARRIORS, second) and not r.hexists(keyspace.WARRIORS, full)
    assert r.hlen(keyspace.WARRIORS) == 2 and refused(r, "register_registry_full") == 1
    # A forgotten id that sends a heartbeat registers again under the same bounds.
    forgotten = "0123456789abcdef" * 2
    res = web.simulate_post(
        "/api/update.json",
        remote_addr="198.51.100.1",
        headers=JSON,
        body=orjson.dumps({"warrior": {"warrior_id": forgotten, "downloader": "alice"}}),
    )
    assert res.status_code == 200 and "projects" in res.json
    assert not r.hexists(keyspace.WARRIORS, forgotten) and refused(r, "register_throttled") == 2


def test_the_environment_does_not_set_the_bounds(engine, r, monkeypatch):
    monkeypatch.setenv("TRACKER_WARRIORS_MAX", "1")
    monkeypatch.setenv("TRACKER_REGISTRATIONS_PER_HOUR", "1")
    web = testing.TestClient(create_app(engine))  # the defaults: 250,000 warriors, 10 an hour
    ids = [register(web, "203.0.113.7") for _ in range(3)]
    assert all(r.hexists(keyspace.WARRIORS, i) for i in ids)
    assert AppConfig().warriors_max == hq.MAX_WARRIORS == 250_000
    assert AppConfig().registrations_per_hour == hq.REGISTRATIONS_PER_HOUR == 10


@click.command()
@server_options.serve_options
def configured(**options):
    config, _ = server_options.server_settings(options, None, None)
    click.echo(f"{config.warriors_max} {config.registrations_per_hour}")


@pytest.mark.parametrize(
    "args, env, shown",
    [
        ([], {}, "250000 10"),
        ([], {"TRACKER_WARRIORS_MAX": "7", "TRACKER_REGISTRATIONS_PER_HOUR": "3"}, "7 3"),
        (["--warriors-max", "5", "--registrations-per-hour", "2"], {"TRACKER_WARRIORS_MAX": "7"}, "5 2"),
    ],
)
def test_serve_and_run_take_the_bounds_as_options_or_their_variables(args, env, shown):
    res = CliRunner().invoke(configured, args, env=env)
    assert res.exit_code == 0 and res.output == f"{shown}\n", res.output


@pytest.mark.parametrize("args", [["--warriors-max", "0"], ["--registrations-per-hour", "many"]])
def test_a_bad_bound_is_a_usage_error(args):
    res = CliRunner().invoke(configured, args)
    assert res.exit_code == 2 and args[0] in res.output
