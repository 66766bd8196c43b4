"""create_app(engine, admin, config): settings come in the AppConfig object, never from os.environ."""

import re

import orjson
import pytest
from falcon import testing

from tracker_api.app import create_app
from tracker_api.web.config import AppConfig
from tracker_core.admin import project_verbs
from tracker_core.warriors import hq

P = "proj"
TOKEN = "scrape-me-0123456789abcdef"


def live_url_shown(web, project=P):
    res = web.simulate_get(f"/{project}/")
    assert res.status_code == 200
    return re.search(r'<meta name="tracker-live-url" content="([^"]*)">', res.text).group(1)


def scrape(web, token):
    return web.simulate_get("/metrics", headers={"Authorization": f"Bearer {token}"})


@pytest.fixture
def project(admin):
    project_verbs.create(admin, P)
    project_verbs.set_settings(admin, P, {"warrior_listed": "0"})[
        "settings_age"
    ]  # only a token that sees everything shows it
    return P


def test_live_url_and_metrics_token_come_from_the_config(engine, project):
    web = testing.TestClient(create_app(engine, config=AppConfig(live_url="/live", metrics_token=TOKEN)))
    assert live_url_shown(web) == "/live"
    res = scrape(web, TOKEN)
    assert res.status_code == 200 and f'project="{P}"' in res.text


def test_the_environment_is_not_read(engine, project, r, monkeypatch):
    """The variables the CLI reads (as its options' envvars) mean nothing to create_app itself:
    a worker gets its settings from the config it is handed, so a stray variable in the
    server's environment cannot open /metrics or move the live feed."""
    monkeypatch.setenv("TRACKER_METRICS_TOKEN", TOKEN)
    monkeypatch.setenv("TRACKER_LIVE_URL", "ws://elsewhere.example:9999")
    web = testing.TestClient(create_app(engine))
    assert live_url_shown(web) == ""  # the default: the page's own host, next port up
    res = scrape(web, TOKEN)
    assert res.status_code == 401 and P not in res.text
    configured = testing.TestClient(
        create_app(engine, config=AppConfig(metrics_token="other-token-0123456789"))
    )
    assert scrape(configured, TOKEN).status_code == 401
    assert scrape(configured, "other-token-0123456789").status_code == 200


def test_trust_forwarded_comes_from_the_config(engine, r):
    """The HQ registry records the address the trusted proxy saw, as the warrior protocol does."""
    body = orjson.dumps({"warrior": {"version": "0.10.3"}})
    headers = {"Content-Type": "application/json", "X-Forwarded-For": "203.0.113.9"}
    for config, seen in ((AppConfig(trust_forwarded=True), "203.0.113.9"), (AppConfig(), "10.9.8.7")):
        web = testing.TestClient(create_app(engine, config=config))
        res = web.simulate_post("/api/register.json", body=body, headers=headers, remote_addr="10.9.8.7")
        listed = {w["warrior_id"]: w for w in hq.list_warriors(r, 0, 100)}
        assert listed[res.json["warrior_id"]]["ip"] == seen
