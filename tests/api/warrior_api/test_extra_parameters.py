"""Per-project extra_parameters: keys merged into every api_version 2 /request answer, which
seesaw-kit's GetItemFromTracker copies into the item for the grab script to read.

The real client runs in a subprocess (seesaw needs tornado's global IOLoop and an alias of
collections.MutableMapping) against `tracker serve`, and prints the item it got.
"""

import json
import subprocess
import sys
import time

import orjson
import pytest
from falcon import testing

from support.projects import new_project
from tracker_api.app import create_app
from tracker_core.admin import project_verbs
from tracker_core.keyspace import ProjectKeys
from tracker_core.project.settings_schema import MAX_EXTRA_PARAMETERS_BYTES

P = "extras"
K = ProjectKeys(P)
URLS = [f"https://example.com/a b/{n}?q=%20&r=1#frag/" + "x" * 2500 for n in range(12)]
EXTRA = {
    "grab_mode": "fast",
    "limits": {"depth": 3, "per_host": [1, 2]},
    "note": "été 🌍",
    "retries": 4,
    "enabled": True,
    "nothing": None,
}

# GetItemFromTracker and one task that prints what the item holds: what a grab script sees.
DRIVER = r"""
import collections, collections.abc, json, sys
collections.MutableMapping = collections.abc.MutableMapping
from seesaw.pipeline import Pipeline
from seesaw.runner import SimpleRunner
from seesaw.task import SimpleTask
from seesaw.tracker import GetItemFromTracker

class Show(SimpleTask):
    def __init__(self):
        SimpleTask.__init__(self, "Show")
    def process(self, item):
        print("ITEM " + json.dumps(dict(item.properties)), flush=True)

url, downloader = sys.argv[1], sys.argv[2]
pipeline = Pipeline(GetItemFromTracker(url, downloader, "20240101.01"), Show())
SimpleRunner(pipeline, max_items=1).start()
"""


def seesaw_item(base: str, project: str, work_dir, multi: int = 1) -> dict:
    url = f"{base}/{project}" + (f"/multi={multi}/" if multi > 1 else "")
    # seesaw makes its data directory in the working directory.
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, url, "extras-warrior"],
        cwd=work_dir,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    lines = [x for x in done.stdout.splitlines() if x.startswith("ITEM ")]
    assert done.returncode == 0 and lines, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads(lines[-1][len("ITEM ") :])


@pytest.fixture
def project(admin):
    return new_project(admin, P, URLS)


@pytest.mark.slow
def test_seesaw_copies_the_extra_parameters_into_the_item(project, admin, live_server, r, tmp_path):
    project_verbs.set_settings(admin, P, {"extra_parameters": json.dumps(EXTRA)})
    item = seesaw_item(live_server.base, P, tmp_path)
    assert item["item_name"] in URLS and r.hget(K.claims, item["item_name"]) is not None
    assert {key: item[key] for key in EXTRA} == EXTRA
    # multi=K: the same keys beside the NUL-joined names.
    item = seesaw_item(live_server.base, P, tmp_path, multi=3)
    names = item["item_name"].split("\0")
    assert len(names) == 3 and set(names) <= set(URLS)
    assert {key: item[key] for key in EXTRA} == EXTRA
    # Without the setting the item holds the name only (and what seesaw adds itself). Each
    # worker process sees a change within a second (its settings cache).
    project_verbs.set_settings(admin, P, {"extra_parameters": ""})
    time.sleep(1.1)
    item = seesaw_item(live_server.base, P, tmp_path)
    assert not set(EXTRA) & set(item)


def request(web, body):
    return web.simulate_post(
        f"/{P}/request", body=orjson.dumps(body), headers={"Content-Type": "application/json"}
    )


def test_the_answer_carries_them_and_item_name_is_the_claims(project, admin, engine, r):
    project_verbs.set_settings(admin, P, {"extra_parameters": json.dumps(EXTRA)})
    web = testing.TestClient(create_app(engine))
    res = request(web, {"downloader": "alice", "api_version": "2"})
    assert res.status_code == 200
    answer = orjson.loads(res.content)
    assert answer == {**EXTRA, "item_name": answer["item_name"]}
    assert answer["item_name"] in URLS
    # The bare-text answer (no api_version) is the name alone: it has no place for them.
    res = request(web, {"downloader": "alice"})
    assert res.status_code == 200 and res.content.decode() in URLS


def test_they_cost_no_redis_call_on_the_request_path(project, admin, engine, r):
    web = testing.TestClient(create_app(engine))
    body = {"downloader": "alice", "api_version": "2"}
    sent = []
    execute = engine.conn.execute_command
    execute_packed = getattr(engine.conn, "execute_packed", None)

    def counting(*args):  # the engine's own connection, counted, not replaced
        sent.append(args[0])
        return execute(*args)

    def counting_packed(payload):  # claim and done, sent as ready RESP (RawRedis only)
        sent.append(payload.split(b"\r\n")[2].decode())
        return execute_packed(payload)

    engine.conn.execute_command = counting
    if execute_packed is not None:
        engine.conn.execute_packed = counting_packed

    def commands_per_request():
        request(web, body)  # its claim reply tells of a new settings age,
        request(web, body)  # and this one reloads them: cached from here
        sent.clear()
        assert request(web, body).status_code == 200
        return list(sent)

    assert commands_per_request() == ["EVALSHA"]
    project_verbs.set_settings(admin, P, {"extra_parameters": json.dumps(EXTRA)})
    assert commands_per_request() == ["EVALSHA"]
    assert "grab_mode" in orjson.loads(request(web, body).content)


def test_a_change_reaches_the_next_answer(project, admin, engine):
    web = testing.TestClient(create_app(engine))
    body = {"downloader": "alice", "api_version": "2"}
    project_verbs.set_settings(admin, P, {"extra_parameters": '{"phase": 1}'})
    assert orjson.loads(request(web, body).content)["phase"] == 1
    project_verbs.set_settings(admin, P, {"extra_parameters": '{"phase": 2}'})
    request(web, body)  # this claim's reply carries the new settings age
    assert orjson.loads(request(web, body).content)["phase"] == 2


def padded(total_bytes: int) -> str:
    """A compact JSON object of exactly TOTAL_BYTES bytes."""
    text = json.dumps({"pad": ""}, separators=(",", ":"))
    return json.dumps({"pad": "p" * (total_bytes - len(text))}, separators=(",", ":"))


@pytest.mark.parametrize(
    "value,reason",
    [
        ('{"item_name": "other"}', "may not set item_name"),
        ('["a", "b"]', "must be a JSON object"),
        ('"text"', "must be a JSON object"),
        ("{'a': 1}", "must be a JSON object"),
        ("{not json", "must be a JSON object"),
        ('{"": 1}', "keys must not be empty"),
        ('{"a": ' + "[" * 300 + "]" * 300 + "}", "cannot be sent"),
        (padded(MAX_EXTRA_PARAMETERS_BYTES + 1), f"at most {MAX_EXTRA_PARAMETERS_BYTES} bytes"),
        ('{"a": "' + "é" * 2100 + '"}', f"at most {MAX_EXTRA_PARAMETERS_BYTES} bytes"),  # bytes
        ("[" * 100_000, f"at most {MAX_EXTRA_PARAMETERS_BYTES} bytes"),
    ],
    ids=[
        "item_name",
        "list",
        "string",
        "python",
        "broken",
        "empty key",
        "deep",
        "past limit",
        "past limit in bytes",
        "brackets",
    ],
)
def test_bad_values_are_refused_with_a_reason_and_change_nothing(project, admin, r, value, reason):
    project_verbs.set_settings(admin, P, {"extra_parameters": '{"kept": 1}'})
    before = r.hgetall(K.settings)
    with pytest.raises(ValueError) as caught:
        project_verbs.set_settings(admin, P, {"extra_parameters": value})
    assert reason in str(caught.value) and "\n" not in str(caught.value)
    assert r.hgetall(K.settings) == before


def test_the_size_limit_is_inclusive_and_values_are_stored_compact(project, admin, r):
    at_limit = padded(MAX_EXTRA_PARAMETERS_BYTES)
    project_verbs.set_settings(admin, P, {"extra_parameters": at_limit})
    assert r.hget(K.settings, "extra_parameters") == at_limit
    project_verbs.set_settings(admin, P, {"extra_parameters": '{ "a" : [ 1 , 2 ] ,\n "b": "é" }'})
    assert r.hget(K.settings, "extra_parameters") == '{"a":[1,2],"b":"é"}'


def test_a_stored_value_that_cannot_be_sent_never_fails_an_answer(project, admin, engine, r):
    # Written past validation (by hand, or by an older version): claims are still answered.
    web = testing.TestClient(create_app(engine))
    for bad in ('{"a": ' + "[" * 300 + "]" * 300 + "}", "[1]", "nonsense", '{"item_name": "not this"}'):
        r.hset(K.settings, "extra_parameters", bad)
        r.hincrby(K.settings, "settings_age", 1)
        request(web, {"downloader": "alice", "api_version": "2"})  # sees the new age
        res = request(web, {"downloader": "alice", "api_version": "2"})
        assert res.status_code == 200
        answer = orjson.loads(res.content)
        assert answer["item_name"] in URLS and set(answer) == {"item_name"}
