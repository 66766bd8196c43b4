"""The hot path (tracker_api.warrior_api.hot_path) answers exactly as Falcon does: status, headers, body,
Redis state and counters, request metrics; for good input and bad, and falls back to Falcon
for everything it does not take."""

from __future__ import annotations

import io

import orjson
import pytest
from falcon import testing

from tracker_api.app import _collapse_slashes, create_app
from tracker_api.warrior_api import hot_path
from tracker_api.warrior_api.warrior_routes import MAX_BODY_BYTES
from tracker_api.web import logs
from tracker_api.web.config import AppConfig
from tracker_core.admin import item_verbs, project_verbs
from tracker_core.infra.processes import free_port
from tracker_core.items import bloom
from tracker_core.items.engine import Engine
from tracker_core.keyspace import ProjectKeys

P = "proj"
URL_ITEM = "https://example.com/a b//c?q=%20&x=ü#frag"
ITEMS = [URL_ITEM, "item-2", "https://example.org/%2F?"]
REQUEST = {"downloader": "alice", "api_version": "2", "version": "20240101.01"}


class NeverHot:
    """A hot path that takes nothing: every request goes to Falcon, as before the hot path."""

    def answer(self, environ, start_response):
        return None


def done_of(names: list[str], **extra) -> dict:
    return {"downloader": "alice", "item": "\0".join(names), "bytes": {"data": 10}, "id": {"x": 1}, **extra}


def call(app, method: str, path: str, body=b"", headers=None, query="", environ=None):
    """(status, header list, body) exactly as APP gave them."""
    if not isinstance(body, bytes):
        body = orjson.dumps(body)
    env = testing.create_environ(path="/", method=method, body=body, headers=headers, query_string=query)
    env["PATH_INFO"] = path  # as the server decoded it: "//", item names with "?" and "#" kept
    env.update(environ or {})
    seen = []

    def start_response(status, header_list, exc_info=None):
        seen.append((status, list(header_list)))

    chunks = app(env, start_response)
    return seen[0][0], seen[0][1], b"".join(chunks)


def relayed(client: str, by: str) -> dict:
    """call's headers and environ for a request from CLIENT that the proxy at BY passed on."""
    return {"headers": {"X-Forwarded-For": client}, "environ": {"REMOTE_ADDR": by}}


def state(r) -> dict:
    """Every key with its value, counters included; a stream by its entries' fields (the ids
    are Redis's clock). Not the admin audit log nor the project's creation time: the setup's."""
    found = {}
    for key in sorted(r.scan_iter()):
        if key.startswith("tracker:audit"):
            continue
        kind = r.type(key)
        found[key] = {
            "set": lambda k: sorted(r.smembers(k)),
            "zset": lambda k: r.zrange(k, 0, -1, withscores=True),
            "hash": r.hgetall,
            "list": lambda k: r.lrange(k, 0, -1),
            "string": r.dump,
            "stream": lambda k: [fields for _, fields in r.xrange(k)],
        }[kind](key)
    found[ProjectKeys(P).settings].pop("created_ms", None)
    return found


def metric_counts(hot) -> dict:
    return {key: series.count for key, series in hot.requests_seen._series.items()}


@pytest.fixture
def apps(redis_url, clock, admin, r):
    """(setup, run): SETUP() gives a fresh project; RUN(which, ...) answers through the full
    app ('hot') or the same app with the hot path taking nothing ('falcon')."""
    engine = Engine(redis_url, clock=clock)
    full = create_app(engine)
    falcon_only = _collapse_slashes(full.falcon_app, NeverHot())
    hot = full.hot_path
    answered = []
    real_answer = hot.answer

    def spying_answer(environ, start_response):
        result = real_answer(environ, start_response)
        answered.append(result is not None)
        return result

    hot.answer = spying_answer

    def setup(claim: int = 0):
        r.flushall()
        engine._settings.clear()
        engine._unknown.clear()
        project_verbs.create(admin, P)
        # One fixed filter salt (all zeros), so that both runs set the same bits (a new filter's
        # salt is random).
        bloom.configure(admin.conn, ProjectKeys(P), bloom.Geometry(salt="0" * 32))
        # One item to claim, so that both runs claim the same one (Redis picks at random).
        item_verbs.add(admin, P, ITEMS if claim else ITEMS[:1])
        claimed = []
        for _ in range(claim):
            status, names = engine.claim(P, "alice", "127.0.0.1", 1)
            claimed += names
        return sorted(claimed)

    def run(which: str, *args, **kwargs):
        answered.clear()
        before = metric_counts(hot)
        result = call(full if which == "hot" else falcon_only, *args, **kwargs)
        after = metric_counts(hot)
        counted = {k: n - before.get(k, 0) for k, n in after.items() if n != before.get(k, 0)}
        return result, counted, any(answered), state(r)

    return setup, run


def same_answer(apps, hot_expected: bool, method: str, path, body=b"", claim: int = 0, **kw):
    """Run the request on a fresh project through each app; assert they agree in everything."""
    setup, run = apps
    path_of = path if callable(path) else (lambda claimed: path)
    body_of = body if callable(body) else (lambda claimed: body)
    claimed = setup(claim)
    falcon_answer, falcon_counted, took, falcon_state = run(
        "falcon", method, path_of(claimed), body_of(claimed), **kw
    )
    assert not took
    assert setup(claim) == claimed  # one item per claim: the same ones both times
    hot_answer, hot_counted, took, hot_state = run("hot", method, path_of(claimed), body_of(claimed), **kw)
    assert took == hot_expected
    assert hot_answer == falcon_answer
    assert hot_counted == falcon_counted and sum(hot_counted.values()) == 1
    assert hot_state == falcon_state
    return hot_answer


HOT_REQUESTS = [
    ("/proj/request", REQUEST, 200),
    ("/proj/request", {"downloader": "alice"}, 200),  # legacy: the bare name as text
    ("/proj/multi=3/request", REQUEST, 200),
    ("/proj/multi=3//request", REQUEST, 200),
    ("//proj//request", REQUEST, 200),
    ("/proj/request/", REQUEST, 200),
    ("/proj/multi=0/request", REQUEST, 400),
    ("/proj/multi=-1/request", REQUEST, 400),  # Falcon's int converter takes it: refused
    ("/proj/multi=007/request", REQUEST, 200),
    ("/proj/request", b'{"downloader', 400),
    ("/proj/request", b"", 400),
    ("/proj/request", b"[1, 2]", 400),
    ("/proj/request", {"downloader": 5}, 400),
    ("/proj/request", {"downloader": "alice", "version": 7}, 400),
    ("/proj/request", {"downloader": "alice", "version": None}, 200),
    ("/proj/request", b"x" * (MAX_BODY_BYTES + 1), 413),
    ("/nope/request", REQUEST, 404),
    ("/nope/done", done_of(["a"]), 404),
    ("/proj/done", done_of([URL_ITEM, "never-claimed"]), 200),
    ("/proj/done", done_of(["a"], bytes={"data": -1}), 400),
    ("/proj/done", done_of(["a"], item=5), 400),
    ("/proj/done", done_of(["a"], item=""), 400),
    ("/proj/done", done_of(["a"], id=[[[[[[]]]]]] * 2000), 200),
    ("/proj/done+request", done_of([URL_ITEM], api_version="2"), 200),
    ("/proj/multi=2/done+request", {**REQUEST, "item": "item-2"}, 200),
    ("/proj/multi=2/done", done_of(["item-2"]), 200),
    ("/proj/done", b'{"downloader": "alice", "item": "a", "bytes": {}, "id": 1} trailing', 400),
]


@pytest.mark.parametrize(("path", "body", "status"), HOT_REQUESTS)
def test_hot_routes_answer_as_falcon_did(apps, path, body, status):
    answer = same_answer(apps, True, "POST", path, body)
    assert answer[0].startswith(str(status))


@pytest.mark.parametrize("path", ["/proj/done", "/proj/multi=2/done", "/proj/done+request"])
def test_a_done_of_claimed_url_items_answers_as_falcon_did(apps, path):
    answer = same_answer(apps, True, "POST", path, lambda claimed: done_of(claimed), claim=3)
    # done+request then finds nothing left to claim.
    assert answer[0] == ("404 Not Found" if path.endswith("+request") else "200 OK")


def test_an_empty_queue_answers_as_falcon_did(apps):
    answer = same_answer(apps, True, "POST", "/proj/request", REQUEST, claim=len(ITEMS))
    assert answer[0] == "404 Not Found" and answer[2] == b""


def test_query_strings_and_a_forwarded_address_change_nothing(apps):
    answer = same_answer(apps, True, "POST", "/proj/request", REQUEST, query="a=1&b=%2F")
    assert answer[0] == "200 OK"
    same_answer(apps, True, "POST", "/proj/request", REQUEST, **relayed("10.9.9.9", by="192.0.2.7"))


@pytest.mark.parametrize(
    ("method", "path", "environ"),
    [
        ("GET", "/proj/request", {}),
        ("HEAD", "/proj/request", {}),
        ("GET", "/proj/done", {}),
        ("PUT", "/proj/done+request", {}),
        ("POST", "/proj/multi=abc/request", {}),
        ("POST", "/proj/request", {"CONTENT_LENGTH": "abc"}),
        ("POST", "/proj/request", {"CONTENT_LENGTH": "-5"}),
        ("POST", "/proj/request", {"CONTENT_LENGTH": "+5"}),
        ("POST", "/proj/request", {"CONTENT_LENGTH": " 5"}),
        ("POST", "/proj/request", {"CONTENT_LENGTH": "5 "}),
        ("POST", "/proj/request", {"CONTENT_LENGTH": "\u0665"}),  # an Arabic-Indic 5: isdigit()
        ("POST", "/proj/request", {"wsgi.input": None}),
        ("POST", "/proj/requests", {}),
        ("POST", "/proj/release", {}),
        ("POST", "/pröj/request", {}),
        ("POST", "/admin/request", {}),
    ],
)
def test_everything_else_goes_to_falcon(apps, method, path, environ):
    same_answer(apps, False, method, path, orjson.dumps(REQUEST), environ=environ)


def test_the_path_the_access_log_reads_is_collapsed(redis_url, admin):
    project_verbs.create(admin, P)
    item_verbs.add(admin, P, ITEMS)
    full = create_app(Engine(redis_url))
    env = testing.create_environ(path="/", method="POST", body=orjson.dumps(REQUEST))
    env["PATH_INFO"] = "/proj/multi=2//request"
    full(env, lambda status, headers, exc_info=None: None)
    assert env["PATH_INFO"] == "/proj/multi=2/request"  # as _collapse_slashes leaves it
    assert full.hot_path.route("/proj/multi=2//request") is not None


def test_redis_down_answers_503_as_falcon_did(redis_url):
    down = Engine(f"redis://127.0.0.1:{free_port()}/0")
    full = create_app(down)
    falcon_only = _collapse_slashes(full.falcon_app, NeverHot())
    for path in ("/proj/request", "/proj/done"):
        body = REQUEST if path.endswith("request") else done_of(["a"])
        hot_answer = call(full, "POST", path, body)
        assert hot_answer == call(falcon_only, "POST", path, body)
        assert hot_answer[0] == "503 Service Unavailable"


def test_an_unexpected_error_answers_500_as_falcon_did(apps, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(Engine, "claim", broken)
    errors = io.StringIO()
    for accept in ("application/json", "application/xml", "*/*"):
        answer = same_answer(
            apps,
            True,
            "POST",
            "/proj/request",
            REQUEST,
            headers={"Accept": accept},
            environ={"wsgi.errors": errors},
        )
        assert answer[0] == "500 Internal Server Error"
    assert errors.getvalue().count("RuntimeError: a bug") == 6


def test_behind_a_trusted_proxy_the_claim_is_made_for_the_forwarded_address(redis_url, admin, r, clock):
    project_verbs.create(admin, P)
    item_verbs.add(admin, P, ITEMS)
    full = create_app(Engine(redis_url, clock=clock), config=AppConfig(trust_forwarded=1))
    status, _, _ = call(full, "POST", "/proj/request", REQUEST, **relayed("203.0.113.9", by="10.0.0.1"))
    assert status == "200 OK"
    assert full.hot_path.route("/proj/request") is not None
    (claim,) = r.hgetall(ProjectKeys(P).claims).values()
    assert "203.0.113.9" in claim and "10.0.0.1" not in claim


@pytest.mark.parametrize("path", ["/backfeed/request", "/backfeed/multi=2/done", "/backfeed/done+request"])
def test_a_project_named_like_the_backfeed_prefix_answers_as_falcon_did(apps, path):
    # Refusals under /backfeed/ are JSON (errors.answer sets resp.media): Falcon's to answer.
    answer = same_answer(apps, False, "POST", path, REQUEST)
    assert answer[0] == "404 Not Found" and orjson.loads(answer[2])["status_code"] == 404


@pytest.mark.parametrize(
    "length", ["9" * 5000, "0" * 5000 + "5", "9" * 19, "0" * 18, "00000000000000000005"], ids=len
)
def test_a_content_length_of_many_digits_answers_as_falcon_did(apps, length):
    # int() refuses a string of more than 4,300 digits: Falcon answers 400, never a 500.
    same_answer(apps, len(length) <= 18, "POST", "/proj/request", REQUEST, environ={"CONTENT_LENGTH": length})


def test_the_route_cache_holds_no_long_paths(redis_url, admin):
    # A scan of long distinct paths (bjoern takes a request line of up to 80 KB) must not fill
    # the worker's memory with them: 4,096 paths of 80 KB each would be 320 MB.
    project_verbs.create(admin, P)
    full = create_app(Engine(redis_url))
    for n in range(50):
        long_path = f"/{n}{'x' * 60_000}/request"
        status, _, _ = call(full, "POST", long_path, REQUEST)
        assert status == "404 Not Found"
        call(full, "POST", f"/{n}{'y' * 60_000}", REQUEST)
    cached = full.hot_path._routes
    assert sum(len(path) for path in cached) <= hot_path.MAX_CACHED_PATH_CHARS * hot_path.MAX_CACHED_PATHS
    assert call(full, "POST", "/proj/request", REQUEST)[0] == "404 Not Found"  # empty queue
    assert "/proj/request" in cached


@pytest.mark.parametrize(
    "environ",
    [
        {"CONTENT_LENGTH": "", "HTTP_TRANSFER_ENCODING": "chunked"},  # no length: an empty body
        {"CONTENT_LENGTH": "0005"},  # the first five bytes, as Falcon reads them
        {"CONTENT_LENGTH": str(MAX_BODY_BYTES + 1)},  # 413 before anything is read
        {"CONTENT_LENGTH": "9" * 18},
        {"HTTP_EXPECT": "100-continue"},
    ],
    ids=["chunked", "leading-zeros", "too-large", "exabyte", "expect"],
)
def test_unusual_lengths_answer_as_falcon_did(apps, environ):
    same_answer(apps, True, "POST", "/proj/request", REQUEST, environ=environ)


def test_a_project_made_after_its_path_was_cached_is_served(redis_url, admin, clock):
    # The route cache holds routes, never whether the project exists.
    engine = Engine(redis_url, clock=clock)
    full = create_app(engine)
    assert call(full, "POST", "/later/request", REQUEST)[0] == "404 Not Found"
    assert full.hot_path.route("/later/request") is not None
    project_verbs.create(admin, "later")
    item_verbs.add(admin, "later", [URL_ITEM])
    engine._unknown.clear()  # the engine's memory of unknown projects lasts a second
    status, _, body = call(full, "POST", "/later/request", REQUEST)
    assert status == "200 OK" and orjson.loads(body)["item_name"] == URL_ITEM


def test_the_access_log_has_one_line_per_hot_request_with_its_status(redis_url, admin, monkeypatch):
    monkeypatch.delenv("JOURNAL_STREAM", raising=False)
    buffer = io.StringIO()
    logs.setup("info", access_log=True, stream=buffer)
    try:
        project_verbs.create(admin, P)
        item_verbs.add(admin, P, [URL_ITEM])
        full = create_app(Engine(redis_url), config=AppConfig(trust_forwarded=1))
        forwarded = {"HTTP_X_FORWARDED_FOR": "203.0.113.9", "REMOTE_ADDR": "10.0.0.1"}
        call(full, "POST", "/proj/multi=2//request", REQUEST, environ=forwarded)
        call(full, "POST", "/proj/request", REQUEST, environ=forwarded)  # the queue is empty now
        # No X-Forwarded-For behind the proxy: refused (client_ip), and logged as unreadable.
        call(full, "POST", "/nope/done", done_of(["a"]), environ={"REMOTE_ADDR": "10.0.0.1"})
        call(full, "POST", "/proj/request", b"{")
    finally:
        logs.reset()
    lines = [line.split("tracker.access: ")[1].split() for line in buffer.getvalue().splitlines()]
    assert [(method, path, status, ip) for method, path, status, _, ip in lines] == [
        ("POST", "/proj/multi=2/request", "200", "203.0.113.9"),
        ("POST", "/proj/request", "404", "203.0.113.9"),
        ("POST", "/nope/done", "400", "unreadable-forwarded-for@10.0.0.1"),
        ("POST", "/proj/request", "400", "unreadable-forwarded-for@127.0.0.1"),
    ]


def test_the_body_is_read_up_to_its_length_whatever_size_is_asked():
    body = hot_path._Body(io.BytesIO(b'{"a": 1}trailing bytes the server left'), 8)
    assert body.read(3) == b'{"a'
    assert body.read() == b'": 1}'
    assert body.read(100) == b"" and body.read(-1) == b"" and body.read(None) == b""
    assert hot_path._Body(io.BytesIO(b"abcdef"), 4).read(-1) == b"abcd"
    assert hot_path._Body(io.BytesIO(b"abcdef"), 4).read(None) == b"abcd"


def test_the_route_cache_keeps_a_path_at_its_length_limit_and_not_one_past_it(redis_url):
    full = create_app(Engine(redis_url))
    at = "/" + "p" * (hot_path.MAX_CACHED_PATH_CHARS - len("//request")) + "/request"
    past = "/" + "q" * (hot_path.MAX_CACHED_PATH_CHARS + 1 - len("//request")) + "/request"
    assert (len(at), len(past)) == (hot_path.MAX_CACHED_PATH_CHARS, hot_path.MAX_CACHED_PATH_CHARS + 1)
    assert full.hot_path.route(at) is not None and full.hot_path.route(past) is not None
    assert at in full.hot_path._routes and past not in full.hot_path._routes


def test_the_route_cache_starts_over_past_its_count_limit(redis_url):
    full = create_app(Engine(redis_url))
    paths = [f"/p{n}/request" for n in range(hot_path.MAX_CACHED_PATHS + 1)]
    for path in paths[:-1]:
        full.hot_path.route(path)
    assert len(full.hot_path._routes) == hot_path.MAX_CACHED_PATHS  # at the limit: all kept
    full.hot_path.route(paths[-1])
    assert list(full.hot_path._routes) == [paths[-1]]  # one past it: emptied, then the new one
