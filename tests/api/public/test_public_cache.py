"""tracker_api.public.public_cache, rendered_files and public_renderer: keys, files, the budget of waits,
and renders equal to the routes."""

from __future__ import annotations

import os
import threading
import time

import orjson
import pytest
from falcon import testing

from support.log_records import captured
from tracker_api.app import create_routes
from tracker_api.public import public_cache, rendered_files
from tracker_api.public.public_cache import ColdBudget, PublicCache, cache_key
from tracker_api.public.public_renderer import Renderer
from tracker_api.public.rendered_files import Store
from tracker_core.admin import item_verbs, project_verbs


class Seen:
    def __init__(self):
        self.observed = []

    def observe(self, template, method, status, elapsed):
        self.observed.append((template, method, status))


@pytest.fixture
def store(tmp_path):
    return Store(str(tmp_path))


@pytest.fixture
def listed(admin):
    for name in ("alpha", "beta"):
        project_verbs.create(admin, name)
    item_verbs.add(admin, "alpha", ["https://example.org/a b?c=%20#d", "https://example.org/e"])
    return "alpha"


class StoppedClock:
    """public_cache's time module for a test: the clock moves only when the cache sleeps, so
    what a wait costs is counted in the cache's own sleeps, not in how busy the machine is."""

    def __init__(self, now: float = 1000.0):
        self.now = now

    def monotonic(self) -> float:
        return self.now

    perf_counter = monotonic

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def environ(path, query="", **headers):
    env = {"REQUEST_METHOD": "GET", "PATH_INFO": path, "QUERY_STRING": query}
    env.update({f"HTTP_{k.upper()}": v for k, v in headers.items()})
    return env


def test_a_written_entry_is_read_back_whole_and_kept_until_the_file_changes(store):
    store.write("k\n\n", "200 OK", [("content-type", "text/plain")], b"body one")
    first = store.read("k\n\n")
    assert (first.status, first.headers, first.body) == (
        "200 OK",
        [("content-type", "text/plain")],
        b"body one",
    )
    assert store.read("k\n\n") is first  # the same file: not read again
    time.sleep(0.01)
    store.write("k\n\n", "503 Service Unavailable", [], b"two")
    second = store.read("k\n\n")
    assert second is not first and second.body == b"two" and second.rendered_at >= first.rendered_at
    assert store.read("other\n\n") is None
    assert not [n for n in os.listdir(store.directory) if n.startswith(".tmp-")]


def test_keys_cover_the_anonymous_aggregates_and_nothing_else(engine, listed):
    assert cache_key(environ("/metrics"), engine, "") == ("/metrics\n\n", "/metrics")
    assert cache_key(environ("/metrics/"), engine, "")[0] == "/metrics\n\n"  # Falcon's route too
    assert cache_key(environ("/metrics", Authorization="Bearer x"), engine, "") is None
    assert cache_key(environ("/"), engine, "")[0] == "/\n\n"
    # projects.json's URLs come from the Host header unless a public URL is configured.
    assert (
        cache_key(environ("/projects.json", Host="a.example"), engine, "")[0] == "/projects.json\n\na.example"
    )
    assert cache_key(environ("/projects.json", Host="a.example"), engine, "https://t.example")[0] == (
        "/projects.json\n\n"
    )
    # stats.json: only the parameters it reads, the first of each, in one order.
    one = cache_key(environ("/alpha/stats.json", "range=day&top=5&x=1&top=9"), engine, "")
    two = cache_key(environ("/alpha/stats.json", "top=5&range=day"), engine, "")
    assert one == two == ("/alpha/stats.json\nrange=day&top=5\n", "/{project}/stats.json")
    assert cache_key(environ("/nosuch/stats.json"), engine, "") is None  # answered 404 inline
    assert cache_key(environ("/alpha/request"), engine, "") is None
    assert cache_key(environ("/alpha"), engine, "") is None
    assert cache_key(environ("/Bad Name/stats.json"), engine, "") is None


@pytest.mark.parametrize(
    "path, query",
    [("/", ""), ("/metrics", ""), ("/projects.json", ""), ("/alpha/stats.json", "top=3&range=hour")],
)
def test_a_render_is_what_the_route_answers(redis_url, engine, listed, store, path, query):
    app = create_routes(engine)
    key = f"{path}\n{query}\n" + ("t.example" if path == "/projects.json" else "")
    Renderer(store, app).render(key)
    rendered = store.read(key)
    direct = testing.TestClient(app).simulate_get(path, query_string=query, headers={"Host": "t.example"})
    assert rendered.status == direct.status
    assert dict(rendered.headers)["content-type"] == direct.headers["content-type"]
    if path == "/metrics":  # Redis's memory and round trip move between two scrapes; the rest not

        def projects_part(text):
            return [line for line in text.splitlines() if line.startswith("# TYPE") or 'project="' in line]

        assert projects_part(rendered.body.decode()) == projects_part(direct.text)
        assert 'tracker_queue_items{project="alpha",queue="todo"} 2.0' in rendered.body.decode()
    elif path == "/alpha/stats.json":
        assert (
            rendered.body.count(b"\n") == direct.content.count(b"\n")
            and b'"project":"alpha"' in rendered.body
        )
    else:
        assert rendered.body == direct.content
    if path == "/projects.json":
        assert b"t.example" in rendered.body


def test_the_budget_allows_so_much_waiting_a_second():
    now = [100.2]
    budget = ColdBudget(0.05, clock=lambda: now[0])
    assert budget.left() == 0.05
    budget.spend(0.03)
    assert budget.left() == pytest.approx(0.02)
    budget.spend(0.03)
    assert budget.left() == 0
    now[0] = 101.0
    assert budget.left() == 0.05


def test_with_no_renderer_a_cold_key_is_a_503_to_retry_and_the_wait_is_bounded(
    engine, listed, store, monkeypatch
):
    clock = StoppedClock()
    monkeypatch.setattr(public_cache, "time", clock)
    seen = Seen()
    cache = PublicCache(store, engine, seen)
    cache.budget = ColdBudget(clock=clock.monotonic)
    answers = []
    body = cache.answer(environ("/metrics"), lambda status, headers: answers.append((status, dict(headers))))
    assert answers[0][0].startswith("503") and answers[0][1]["retry-after"] == "1"
    assert body == [b"being prepared, retry in a second\n"]
    assert clock.now == 1000.0  # nobody to ask: no wait
    assert seen.observed == [("/metrics", "GET", 503)]
    # A renderer that takes the asks but renders nothing: the first cold ask waits COLD_WAIT_S
    # (in polls of COLD_POLL_S), which spends the second's budget; the next ones wait no more.
    silent = Renderer(store, create_routes(engine))
    silent.bind()
    try:
        assert cache.answer(environ("/metrics"), lambda *a: None) == body
        took = clock.now - 1000.0
        assert public_cache.COLD_WAIT_S <= took < public_cache.COLD_WAIT_S + 2 * public_cache.COLD_POLL_S
        assert cache.budget.left() == 0
        for path in ("/", "/projects.json", "/metrics"):
            cache.answer(environ(path), lambda *a: None)
        assert clock.now == 1000.0 + took
    finally:
        silent.sock.close()


def test_a_fresh_render_is_served_and_a_stale_one_too_while_a_new_one_is_asked_for(engine, listed, store):
    cache = PublicCache(store, engine, Seen(), max_age_s=0.2)
    store.write("/\n\n", "200 OK", [("content-type", "text/html")], b"page")
    got = []
    assert cache.answer(environ("/"), lambda s, h: got.append(s)) == [b"page"] and got == ["200 OK"]
    head = cache.answer({**environ("/"), "REQUEST_METHOD": "HEAD"}, lambda s, h: None)
    assert head == [b""]
    time.sleep(0.25)  # past max age; no renderer answers, so the old page is served after the ask
    assert cache.answer(environ("/"), lambda s, h: None) == [b"page"]


def test_the_renderer_answers_asks_and_renders_each_key_once_per_max_age(engine, listed, store, monkeypatch):
    app = create_routes(engine)
    renderer = Renderer(store, app, max_age_s=60)
    renderer.bind()
    cache = PublicCache(store, engine, Seen(), max_age_s=60)
    cache.inline = public_cache.ByteBudget(0, 0)  # every first ask waits for the renderer
    # as long as a render takes on a loaded machine (the wait's bound has its own test above)
    monkeypatch.setattr(public_cache, "COLD_WAIT_S", 30.0)
    cache.budget = ColdBudget(30.0)
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            renderer.receive(0.05)
            while renderer.step():
                renderer.receive(0)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        answers = []
        for _ in range(20):
            cache.answer(environ("/alpha/stats.json", "top=2"), lambda s, h: answers.append(s))
        # The first waited for its render; the rest were served from it.
        assert answers[0] == "200 OK" and set(answers) == {"200 OK"}
        assert renderer.renders == 1
    finally:
        stop.set()
        thread.join(5)
        renderer.sock.close()


def test_a_key_past_its_bound_is_refused_with_414(engine, listed, store):
    cache = PublicCache(store, engine, Seen())
    cache.inline = public_cache.ByteBudget(0, 0)
    got = []
    cache.answer(environ("/alpha/stats.json", "downloader=" + "x" * 2000), lambda s, h: got.append(s))
    assert got == ["414 URI Too Long"]
    # At the bound: a key of MAX_KEY_CHARS is asked for (a 503 here: no renderer runs).
    path = "/alpha/stats.json"
    room = rendered_files.MAX_KEY_CHARS - len(f"{path}\ndownloader=\n")
    got.clear()
    cache.answer(environ(path, "downloader=" + "y" * room), lambda s, h: got.append(s))
    assert got[0].startswith("503")


def test_trim_removes_stale_files_and_the_oldest_past_the_byte_bound(store):
    for i in range(5):
        store.write(f"k{i}\n\n", "200 OK", [], b"x" * 1000)
    old = store.directory / rendered_files.file_name("k0\n\n")
    os.utime(old, (time.time() - rendered_files.STALE_S - 5,) * 2)
    assert store.trim() == 1 and store.read("k0\n\n") is None
    removed = store.trim(max_bytes=2500)
    assert removed == 2
    assert [store.read(f"k{i}\n\n") is not None for i in range(1, 5)] == [False, False, True, True]


def test_a_render_that_cannot_be_written_is_logged_and_the_renderer_goes_on(engine, listed, tmp_path):
    store = Store(str(tmp_path / "gone"))  # no such directory: every write fails as a dead disk's
    app = create_routes(engine)
    renderer = Renderer(store, app)
    renderer.pending["/\n\n"] = None
    renderer.pending["/metrics\n\n"] = None
    with captured("tracker.public_cache") as messages:
        assert renderer.step() and renderer.step()
    assert renderer.renders == 0 and not renderer.pending
    assert sum("cannot write the rendered answer" in m for m in messages) == 2


def test_heartbeats_carry_the_rendered_document_not_one_built_per_heartbeat(
    redis_url, engine, listed, store, r
):
    from dataclasses import replace

    from tracker_api.app import create_app
    from tracker_api.web.config import AppConfig
    from tracker_core.keyspace import ProjectKeys

    config = replace(AppConfig(), public_cache_dir=str(store.directory), public_cache_max_age_s=60)
    Renderer(store, create_routes(engine)).render(public_cache.projects_key("t.example", ""))
    rendered = store.read(public_cache.projects_key("t.example", "")).body
    # A change after the render: an answer built per heartbeat would show it at once.
    r.hset(ProjectKeys("alpha").settings, "title", "Changed after the render")
    client = testing.TestClient(create_app(engine, config=config))
    heartbeat = {"warrior": {"warrior_id": "a" * 32, "downloader": "tester"}}
    answer = client.simulate_post("/api/update.json", json=heartbeat, headers={"Host": "t.example"})
    assert answer.status_code == 200 and answer.content == rendered
    assert b"Changed after the render" not in answer.content
    # A refused field: the same document, with the reason added.
    bad = {"warrior": {"warrior_id": "a" * 32, "downloader": "x" * 500}}
    answer = client.simulate_post("/api/update.json", json=bad, headers={"Host": "t.example"})
    document = answer.json
    assert "refused" in document and document["projects"] == orjson.loads(rendered)["projects"]
    # Another Host, never rendered: the document rendered for no Host, not one built here.
    Renderer(store, create_routes(engine)).render(public_cache.projects_key(None, ""))
    answer = client.simulate_post("/api/update.json", json=heartbeat, headers={"Host": "forged.example"})
    assert answer.content == store.read(public_cache.projects_key(None, "")).body


def test_projects_json_for_a_host_not_rendered_yet_is_the_one_for_no_host_not_a_503(engine, listed, store):
    Renderer(store, create_routes(engine)).render(public_cache.projects_key(None, ""))
    cache = PublicCache(store, engine, Seen())
    got = []
    body = cache.answer(environ("/projects.json", Host="new.example"), lambda s, h: got.append(s))
    assert got == ["200 OK"] and body == [store.read(public_cache.projects_key(None, "")).body]
    assert b"new.example" not in body[0]


def test_a_first_stats_json_is_answered_by_the_worker_so_often_and_then_waits(engine, listed, store):
    cache = PublicCache(store, engine, Seen())
    # its allowance as built, on a clock that stands still: none of it comes back mid-loop
    cache.inline = public_cache.ByteBudget(cache.inline.rate, cache.inline.burst, clock=lambda: 0.0)
    statuses = []
    for n in range(int(public_cache.INLINE_BURST) + 1):
        got = cache.answer(environ("/alpha/stats.json", f"downloader=d{n}"), lambda s, h: statuses.append(s))
        statuses.append("app" if got is None else "cache")
    # The burst answered by the app itself (None: the caller hands it on), then a 503 to retry.
    assert statuses[: int(public_cache.INLINE_BURST)] == ["app"] * int(public_cache.INLINE_BURST)
    assert statuses[-2:] == ["503 Service Unavailable", "cache"]
    # Whole-tracker aggregates are never answered by the worker: they wait for the renderer.
    got = []
    cache.answer(environ("/metrics"), lambda s, h: got.append(s))
    assert got[0].startswith("503")
