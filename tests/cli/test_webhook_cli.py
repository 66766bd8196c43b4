"""`tracker webhook add|list|remove`: the secret printed once, tables and --json, refusals as one
line and exit 1; `tracker maintain`'s webhook options at and past their bounds."""

from __future__ import annotations

import json

import pytest

from tracker_api.cli.webhooks import MAINTAIN_OPTIONS

URL = "https://hooks.example.com/tracker?room=a%20b"


def test_add_list_remove(cli):
    assert cli("project", "create", "wp").exit_code == 0
    added = cli("webhook", "add", URL, "--project", "wp", "--events", "project.drained, project.paused")
    assert added.exit_code == 0, added.output
    hook_id = added.output.split()[1]
    secret = added.output.split("secret (shown once; it signs each POST): ")[1].strip()
    assert "project.drained, project.paused" in added.output and secret.startswith("whsec_")
    listed = cli("webhook", "list")
    assert listed.exit_code == 0 and hook_id in listed.output and URL in listed.output
    assert secret not in listed.output and "whsec_" not in listed.output
    rows = json.loads(cli("--json", "webhook", "list", "--project", "wp").output)["webhooks"]
    assert [(r["hook_id"], r["events"], r["delivered"], r["last_status"]) for r in rows] == [
        (hook_id, ["project.drained", "project.paused"], 0, None)
    ]
    assert json.loads(cli("--json", "webhook", "list", "--project", "wp").output).get("outbox") is None
    removed = cli("webhook", "remove", hook_id)
    assert removed.exit_code == 0 and removed.output == f"removed {hook_id}\n"
    assert json.loads(cli("--json", "webhook", "list").output)["webhooks"] == []


@pytest.mark.parametrize(
    "args, reason",
    [
        (["webhook", "add", "gopher://example.com/"], "http:// or https://"),
        (["webhook", "add", URL, "--events", "project.vanished"], "unknown event 'project.vanished'"),
        (["webhook", "add", URL, "--project", "nope"], "unknown project 'nope'"),
        (["webhook", "add", "https://example.com/" + "a" * 1981], "at most 2000 characters"),
        (["webhook", "remove", "0123456789ab"], "no webhook '0123456789ab'"),
        (["webhook", "remove", "zz"], "12 hex characters"),
    ],
)
def test_refusals_are_one_line_and_exit_1(cli, args, reason):
    result = cli(*args)
    assert result.exit_code == 1 and reason in result.output and result.output.count("\n") == 1, result.output


@pytest.mark.parametrize("name", sorted(MAINTAIN_OPTIONS))
def test_maintain_webhook_options_at_and_past_their_bounds(cli, name, tmp_path):
    _default, low, high, _help = MAINTAIN_OPTIONS[name]
    option = "--" + name.replace("_", "-")
    for value in (low, high):
        result = cli("maintain", "--segments-dir", str(tmp_path), option, str(value), "--once")
        assert result.exit_code == 0, result.output
    step = 1 if isinstance(low, int) else low / 10 or 0.01
    for value in (low - step, high + step):
        result = cli("maintain", "--segments-dir", str(tmp_path), option, str(value), "--once")
        assert result.exit_code == 2 and "is not in the range" in result.output, (value, result.output)
