"""Webhooks as the admin verbs keep them (tracker_core.admin.webhook_verbs over notify.hooks):
every bound at and just past it, the secret shown once, every change audited."""

from __future__ import annotations

import pytest

from tracker_core.admin import log_verbs, project_verbs, webhook_verbs
from tracker_core.admin.errors import BadInput, NotFound
from tracker_core.notify import hooks

URL = "https://hooks.example.com/tracker?channel=archive"


def test_the_secret_is_shown_once_and_the_change_audited(admin):
    added = webhook_verbs.add(admin, URL)
    assert added["secret"].startswith("whsec_") and len(added["secret"]) == len("whsec_") + 43
    assert added["events"] == list(hooks.EVENTS) and added["project"] is None
    listed = webhook_verbs.list_hooks(admin)
    assert "secret" not in str(listed) and added["secret"] not in str(listed)
    row = listed["webhooks"][0]
    assert (row["hook_id"], row["url"], row["delivered"], row["failures"], row["dropped"]) == (
        added["hook_id"], URL, 0, 0, 0,
    )  # fmt: skip
    assert listed["outbox"]["waiting"] == 0
    entry = log_verbs.audit_page(admin)["entries"][0]
    assert entry["action"] == "webhook.add" and entry["detail"]["host"] == "hooks.example.com"
    assert "channel" not in str(entry)  # the URL's path and query may be a receiver's own secret
    assert webhook_verbs.remove(admin, added["hook_id"]) == {"removed": added["hook_id"]}
    assert log_verbs.audit_page(admin)["entries"][0]["action"] == "webhook.remove"
    with pytest.raises(NotFound):
        webhook_verbs.remove(admin, added["hook_id"])


@pytest.mark.parametrize(
    "url, reason",
    [
        ("ftp://example.com/hook", "http:// or https://"),
        ("file:///etc/passwd", "http:// or https://"),
        ("https://user:pw@example.com/hook", "user or password"),
        ("https:///nohost", "must name a host"),
        ("https://example.com/a b", "without spaces"),
        ("https://example.com:99999/", "bad url"),
        ("https://example.com/#frag", "fragment"),
        ("", "non-empty"),
        (7, "non-empty string"),
    ],
)
def test_urls_a_receiver_cannot_be_at_are_refused(admin, url, reason):
    with pytest.raises(BadInput, match=reason):
        webhook_verbs.add(admin, url)
    assert webhook_verbs.list_hooks(admin)["webhooks"] == []


def test_the_url_length_at_and_past_its_bound(admin):
    base = "https://example.com/"
    at = base + "a" * (hooks.MAX_URL_CHARS - len(base))
    assert webhook_verbs.add(admin, at)["url"] == at
    with pytest.raises(BadInput, match=f"at most {hooks.MAX_URL_CHARS}"):
        webhook_verbs.add(admin, at + "a")


def test_the_number_of_hooks_at_and_past_its_bound(admin):
    for i in range(hooks.MAX_HOOKS):
        webhook_verbs.add(admin, f"http://127.0.0.1:9/hook/{i}")
    with pytest.raises(BadInput, match=f"{hooks.MAX_HOOKS} webhooks already"):
        webhook_verbs.add(admin, "http://127.0.0.1:9/one-more")
    assert len(webhook_verbs.list_hooks(admin)["webhooks"]) == hooks.MAX_HOOKS


def test_events_come_from_the_fixed_list_and_a_projects_hook_gets_only_project_events(admin):
    project_verbs.create(admin, "p")
    chosen = webhook_verbs.add(admin, URL, events=["clock.off", "project.drained", "clock.off"])
    assert chosen["events"] == ["project.drained", "clock.off"]
    with pytest.raises(BadInput, match="unknown event 'project.exploded'"):
        webhook_verbs.add(admin, URL, events=["project.exploded"])
    with pytest.raises(BadInput, match="list of event names"):
        webhook_verbs.add(admin, URL, events="project.drained")
    with pytest.raises(BadInput, match="only a hook without a project"):
        webhook_verbs.add(admin, URL, project="p", events=["redis.failover"])
    own = webhook_verbs.add(admin, URL, project="p")
    assert "clock.off" not in own["events"] and "project.drained" in own["events"]
    assert [h["hook_id"] for h in webhook_verbs.list_hooks(admin, "p")["webhooks"]] == [own["hook_id"]]
    with pytest.raises(NotFound):
        webhook_verbs.add(admin, URL, project="nope")
    with pytest.raises(NotFound, match="for project 'p'"):
        webhook_verbs.remove(admin, chosen["hook_id"], project="p")  # not p's
    with pytest.raises(BadInput, match="12 hex"):
        webhook_verbs.remove(admin, "../../x")
