"""The Redis password from a file, found and masked in any URL shape (cli/redis_secret.py).

The real processes (serve, run and their workers on a password-protected Redis) are in
tests/e2e/test_redis_password_cmdline.py.
"""

from __future__ import annotations

import click
import pytest

from tracker_api.cli import redis_secret
from tracker_api.cli.process_commands import TrackerChild
from tracker_core.infra.rawredis import parse_redis_url
from tracker_core.infra.topology import parse_topology_url


@pytest.mark.parametrize(
    "url,secrets",
    [
        ("redis://:pw1@10.0.0.1:6379/0", ["pw1"]),
        ("redis://tracker:pw2@h/0", ["pw2"]),
        ("redis://:pa@ss@h:6379/0", ["pa@ss"]),  # a raw '@': the password runs to the last one
        ("redis+sentinel://:pw3@a:26379,b:26379/mymaster", ["pw3"]),
        ("redis+sentinel://pw4@a:26379/mymaster", ["pw4"]),  # topology reads a bare one too
        ("redis+cluster://:pw5@a:7000,b:7001", ["pw5"]),
        ("unix:///run/redis.sock?db=1&password=pw6", ["pw6"]),
        ("redis://tracker@h/0", []),
        ("redis://h:6379/0", []),
        ("unix:///run/redis.sock", []),
    ],
)
def test_every_password_a_url_can_hold_is_found_and_masked(url, secrets):
    assert redis_secret.secrets_in(url) == secrets
    shown = redis_secret.masked(url, redis_secret.secrets_in(url))
    assert not any(secret in shown for secret in secrets)
    assert (redis_secret.MASK in shown) == bool(secrets)


@pytest.mark.parametrize(
    "url,expected",
    [
        ("redis://10.0.0.1:6379/2", "redis://:p%40ss%2Fw%3Ard%25@10.0.0.1:6379/2"),
        ("redis://acl-user@h:6379/0", "redis://acl-user:p%40ss%2Fw%3Ard%25@h:6379/0"),
        ("unix:///run/redis.sock?db=3", "unix://:p%40ss%2Fw%3Ard%25@/run/redis.sock?db=3"),
        ("redis+sentinel://a:26379,b:26379/m", "redis+sentinel://:p%40ss%2Fw%3Ard%25@a:26379,b:26379/m"),
    ],
)
def test_the_password_file_fills_in_the_url_as_every_parser_reads_it(url, expected):
    password = "p@ss/w:rd%"
    made = redis_secret.with_password(url, password)
    assert made == expected
    if made.startswith("redis+"):
        assert parse_topology_url(made)["password"] == password
    else:
        assert parse_redis_url(made)["password"] == password


def test_a_password_given_twice_or_to_no_url_is_a_usage_error():
    with pytest.raises(click.UsageError, match="give it once"):
        redis_secret.with_password("redis://:pw@h/0", "other")
    with pytest.raises(click.UsageError, match="needs a Redis URL"):
        redis_secret.with_password("h:6379", "pw")


def test_the_password_file_is_one_line(tmp_path):
    path = tmp_path / "password"
    path.write_text("s3cret\n")
    assert redis_secret.read_password_file(str(path)) == "s3cret"
    path.write_text("s3cret\r\n")
    assert redis_secret.read_password_file(str(path)) == "s3cret"
    for bad in ("", "\n", "one\ntwo\n"):
        path.write_text(bad)
        with pytest.raises(click.BadParameter, match="one line"):
            redis_secret.read_password_file(str(path))
    with pytest.raises(click.BadParameter, match="cannot read"):
        redis_secret.read_password_file(str(tmp_path / "missing"))


def test_the_cli_builds_the_url_from_the_file_and_refuses_it_without_one(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from tracker_api.cli import main
    from tracker_api.cli.root import globals_

    for name in ("TRACKER_REDIS_URL", redis_secret.PASSWORD_FILE_VARIABLE):
        monkeypatch.delenv(name, raising=False)
    path = tmp_path / "password"
    path.write_text("s3cret\n")
    seen = []

    @main.command("test-show-url", hidden=True)
    def show_url():
        seen.append(globals_().redis_url)

    try:
        runner = CliRunner()
        result = runner.invoke(main, ["test-show-url", "--redis-url", "redis://h:1/0"], env={
            redis_secret.PASSWORD_FILE_VARIABLE: str(path)
        })  # fmt: skip
        assert result.exit_code == 0, result.output
        assert seen == ["redis://:s3cret@h:1/0"]
        result = runner.invoke(main, ["--redis-password-file", str(path), "test-show-url"])
        assert result.exit_code == 2 and "needs --redis-url" in result.output
    finally:
        main.commands.pop("test-show-url")


def test_children_get_the_whole_url_and_no_password_file(monkeypatch):
    """`tracker run`'s maintain and live read the URL, password included, from their
    environment: the password file again would be a password given twice."""
    monkeypatch.setenv(redis_secret.PASSWORD_FILE_VARIABLE, "/etc/tracker/redis-password")
    child = TrackerChild.of("redis://:s3cret@h:1/0", None, "maintain")
    assert child.env["TRACKER_REDIS_URL"] == "redis://:s3cret@h:1/0"
    assert redis_secret.PASSWORD_FILE_VARIABLE not in child.env
    assert not any("s3cret" in arg for arg in child.argv)
