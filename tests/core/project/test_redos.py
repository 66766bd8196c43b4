"""Hostile names and patterns: regex limits run in linear time (RE2), patterns RE2 cannot run are
refused, and anonymous release and item status never classify a name that is not the project's."""

import json
import time
from urllib.parse import quote

import orjson
import pytest
from falcon import testing

from support.item_status import NOWHERE, place
from tracker_api.app import create_app
from tracker_core import keyspace
from tracker_core.admin import item_verbs, limit_verbs, project_verbs
from tracker_core.admin.context import AdminContext
from tracker_core.admin.errors import AdminError
from tracker_core.compiled import _classify_py
from tracker_core.items import intake
from tracker_core.items.engine import Engine
from tracker_core.project import pattern_limits

try:
    from tracker_core.compiled import _classify_c
except ImportError:  # built with TRACKER_NO_EXTENSIONS=1
    _classify_c = None

P = "redos"
K = keyspace.ProjectKeys(P)
# Nested quantifiers: a backtracking engine tries every way to split the path into words, so a
# name that fails at its last character takes time doubling per character (3 s at 47 characters).
BACKTRACKING = r"regex:^https?://example\.com/(\w+/?)*$"
HOSTILE = "https://example.com/" + "a" * 26 + "!"  # 47 characters
HOSTILE_LONG = "https://example.com/" + "ab/" * 1300 + "!"  # about 4 KB
# The same trap for names without '/' (the item-status route takes one path segment).
BACKTRACKING_IDS = r"regex:^id:(\w+-?)*$"
HOSTILE_ID = "id:" + "a" * 43 + "!"  # 47 characters
# Far above what these calls take with a linear-time engine (milliseconds, on a busy machine),
# far below the seconds a backtracking engine takes on HOSTILE.
FAST_S = 0.5

IMPLEMENTATIONS = pytest.mark.parametrize(
    "impl",
    [
        _classify_py,
        pytest.param(
            _classify_c, marks=pytest.mark.skipif(_classify_c is None, reason="built without extensions")
        ),
    ],
    ids=["pure", "compiled"],
)


def legacy(answer: dict) -> dict:
    """The keys the old tracker answered (its clients read them): status and downloader."""
    return {"status": answer["status"], "downloader": answer["downloader"]}


def elapsed(call, *args):
    start = time.perf_counter()
    result = call(*args)
    return result, time.perf_counter() - start


@pytest.fixture(params=["compiled", "pure"])
def classifier_impl(request, monkeypatch):
    """Serve the app's limits through the compiled classifier, then through its twin."""
    module = _classify_py if request.param == "pure" else _classify_c
    if module is None:
        pytest.skip("built without extensions")
    monkeypatch.setattr(pattern_limits, "Classifier", module.Classifier)
    return request.param


@pytest.fixture
def project(ctx):
    project_verbs.create(ctx, P)
    limit_verbs.add(ctx, P, "site", BACKTRACKING, "1/m")
    limit_verbs.add(ctx, P, "ids", BACKTRACKING_IDS, "1/m")
    return P


@pytest.fixture
def web(engine, classifier_impl):
    return testing.TestClient(create_app(engine))


def post(web, path, body):
    return web.simulate_post(path, body=orjson.dumps(body), headers={"Content-Type": "application/json"})


# -- the classifier ------------------------------------------------------------------------------


@IMPLEMENTATIONS
def test_a_backtracking_regex_classifies_hostile_names_in_linear_time(impl):
    classifier = impl.Classifier(["type:user", BACKTRACKING])
    answers, took = elapsed(classifier.classify_many, [HOSTILE, HOSTILE_LONG, HOSTILE + "a" * 30])
    assert answers == [-1, -1, -1] and took < FAST_S
    assert classifier.classify_many(["https://example.com/a/bc/d", "http://example.com/", "user:x"]) == [
        1,
        1,
        0,
    ]


@IMPLEMENTATIONS
def test_regexes_without_a_literal_also_run_on_re2(impl):
    # No literal to prefilter on: tried on every name, all in one RE2 pass.
    patterns = ["regex:(a|aa)+$", "type:x", "regex:^(\\w+\\s?)*$", "regex:[0-9]{3}"]
    classifier = impl.Classifier(patterns)
    hostile = "a" * 60 + "!"
    answers, took = elapsed(classifier.classify_many, [hostile, "word " * 20 + "!", "x:1", "aa"])
    assert took < FAST_S and answers == [-1, -1, 1, 0]
    assert classifier.classify_many(["ab 12", "b-123", "x:123"]) == [2, 3, 1]


@IMPLEMENTATIONS
@pytest.mark.parametrize(
    "pattern,reason",
    [
        (r"regex:(a)\1", "invalid escape sequence"),  # backreference
        (r"regex:a(?=b)", "invalid perl operator"),  # lookahead
        (r"regex:(?<!a)b", "invalid"),  # lookbehind
        (r"regex:abc\Z", "invalid escape sequence"),  # Python's \Z is RE2's \z
        (r"regex:a*+", "bad repetition operator"),  # possessive
        ("regex:(?x) a b", "invalid perl operator"),
        ("regex:\\pL{5}", "too complex"),  # 6,000 RE2 steps
        ("regex:a\ud800", "not valid UTF-8"),
        ("regex:(a\nb", "missing"),  # the reason stays one line
    ],
)
def test_patterns_re2_cannot_run_are_refused_with_a_one_line_reason(impl, pattern, reason):
    with pytest.raises(_classify_py.PatternError, match=reason) as info:
        impl.Classifier([pattern])
    assert "\n" not in str(info.value)


@IMPLEMENTATIONS
@pytest.mark.parametrize(
    "pattern,name,matches",
    [
        ("regex:[[:alpha:]]x", "1ax", True),  # a POSIX class, not a nested set
        ("regex:[[:alpha:]]x", "]x", False),
        ("regex:^a{,3}b", "a{,3}b", True),  # RE2 reads {,3} as text
        ("regex:^a{,3}b", "ab", False),
        ("regex:\\pLx", "éx", True),
        ("regex:\\x{263a}!", "a☺!", True),
        ("regex:^(?<n>ab)c", "abc", True),
        ("regex:\\Qa.b\\E$", "xa.b", True),
        ("regex:\\Qa.b\\E$", "xaxb", False),
        ("regex:\\w+é$", "abé", True),
        ("regex:abc\\z", "xabc", True),
        ("regex:abc$", "abc\n", False),  # RE2's $ is the end of the text
    ],
)
def test_re2_syntax_is_read_as_re2_reads_it(impl, pattern, name, matches):
    assert impl.Classifier([pattern]).classify(name) == (0 if matches else -1)


def test_limit_add_refuses_what_re2_cannot_run_and_stores_nothing(r, engine, ctx):
    project_verbs.create(ctx, P)
    before = r.hget(K.settings, "settings_age")
    with pytest.raises(AdminError, match="RE2") as info:
        limit_verbs.add(ctx, P, "bad", r"regex:(a)\1", "1/s")
    assert "\n" not in str(info.value)
    assert r.hget(K.settings, "settings_age") == before and not r.exists(K.limits)


def test_limit_add_over_http_answers_400_with_one_line(r, engine, ctx):
    from tracker_core.access import tokens

    project_verbs.create(ctx, P)
    token = tokens.create(r, P, "ops")[0]
    web = testing.TestClient(create_app(engine))
    res = web.simulate_post(
        f"/api/admin/projects/{P}/limits",
        body=orjson.dumps({"name": "bad", "pattern": "regex:a(?=b)", "rate": "1/s"}),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
    )
    assert res.status_code == 400 and "RE2" in res.text and "\n" not in res.text.strip()
    assert not r.exists(K.limits)


def test_a_stored_limit_re2_cannot_run_matches_nothing_and_breaks_nothing(r, engine, ctx):
    # Limits added before regexes ran on RE2 may use syntax it refuses: the project keeps
    # working, that limit holds nothing, and the others still hold their items.
    project_verbs.create(ctx, P)
    limit_verbs.add(ctx, P, "users", "type:user", "1/m")
    r.hset(
        K.limits,
        "old",
        orjson.dumps({"pattern": r"regex:^(a)\1", "rate": "1/s", "rate_per_s": 1.0, "seq": 0}).decode(),
    )
    compiled_limits = pattern_limits.CompiledLimits(pattern_limits.load(r, K))
    assert compiled_limits.unusable == ["old"]
    assert compiled_limits.names_of(["aa", "user:x", "b"]) == [None, "users", None]
    r.hincrby(K.settings, "settings_age", 1)
    item_verbs.add(ctx, P, ["aa", "user:x"])
    assert r.smembers(K.todo) == {"aa"} and r.zrange(K.limited, 0, -1) == ["users\0user:x"]
    status, names = engine.claim(P, "alice", "127.0.0.1", 5)
    assert status == 200 and "aa" in names


# -- anonymous clients over HTTP -----------------------------------------------------------------


def test_item_status_of_a_hostile_name_answers_in_milliseconds(project, web):
    for name in (HOSTILE_ID, "id:" + "ab-" * 1300 + "!"):
        res, took = elapsed(web.simulate_get, f"/{P}/items/{quote(name, safe='')}.json")
        assert res.status_code == 200 and res.json == NOWHERE
        assert took < FAST_S


def test_release_of_hostile_names_answers_in_milliseconds(project, web, r):
    for name in (HOSTILE, HOSTILE_LONG):
        res, took = elapsed(post, web, f"/{P}/release", {"item": name})
        assert res.status_code == 200 and res.text == "OK" and took < FAST_S
    res, took = elapsed(
        post, web, f"/{P}/release", {"downloader": "alice", "item": "\0".join([HOSTILE] * 50)}
    )
    assert res.status_code == 200 and took < FAST_S
    assert r.hget(K.stats, "items_released") in (None, "0")


def test_backfeed_of_hostile_names_answers_in_milliseconds(project, web, r):
    secret = admin_secret(r)
    matching = "https://example.com/a/b/c"
    body = "\0".join([HOSTILE, HOSTILE_LONG, matching]).encode()
    res, took = elapsed(lambda: web.simulate_post(f"/backfeed/legacy/{P}-{secret}", body=body))
    assert res.status_code == 200 and res.json["status_code"] == 200 and took < FAST_S
    assert r.smembers(K.backfeed) == {HOSTILE, HOSTILE_LONG}
    assert r.zrange(K.limited, 0, -1) + list(r.smembers(K.limited_in)) == [f"site\0{matching}"]


def admin_secret(r):
    from tracker_core.access import backfeed_secrets

    return backfeed_secrets.create(r, K)[1]


# -- release and item status classify only the project's own names -------------------------------


@pytest.fixture
def classified(monkeypatch):
    """Record every name the limits classify (the names the tracker spends work on)."""
    seen = []
    names_of, name_of = pattern_limits.CompiledLimits.names_of, pattern_limits.CompiledLimits.name_of

    def record_many(self, items):
        seen.extend(items)
        return names_of(self, items)

    def record_one(self, item):
        seen.append(item)
        return name_of(self, item)

    monkeypatch.setattr(pattern_limits.CompiledLimits, "names_of", record_many)
    monkeypatch.setattr(pattern_limits.CompiledLimits, "name_of", record_one)
    return seen


def test_release_classifies_only_the_claims_it_gives_back(engine, r, classified, ctx):
    # Anonymous clients may send any names: only claims actually given back are classified.
    project_verbs.create(ctx, P)
    item_verbs.add(ctx, P, [f"https://example.com/{n}/" for n in ("one", "two", "three")])
    status, alices = engine.claim(P, "alice", "127.0.0.1", 2)
    status, bobs = engine.claim(P, "bob", "127.0.0.1", 1)
    limit_verbs.add(ctx, P, "site", BACKTRACKING, "1/m", reclassify=False)
    engine = Engine(engine.redis_url)  # sees the new limit at once
    classified.clear()
    released = engine.release(P, "alice", [alices[0], bobs[0], HOSTILE, "never added"])
    assert released == 1 and classified == [alices[0]]
    # A released claim the limit matches is held, not put back in todo.
    assert r.zrange(K.limited, 0, -1) == [f"site\0{alices[0]}"] and not r.exists(K.todo)
    assert r.hget(K.claims, bobs[0]) is not None
    classified.clear()
    assert engine.release(P, "", [HOSTILE, "nothing"]) == 0 and classified == []
    assert engine.release("no-such-project", "", [HOSTILE]) is None


def test_item_status_classifies_nothing_and_finds_held_items(project, engine, r, classified, ctx):
    held = "https://example.com/a/b"
    item_verbs.add(ctx, P, [held])
    assert r.zrange(K.limited, 0, -1) == [f"site\0{held}"]
    classified.clear()
    assert engine.item_status(P, held) == ("todo", None)
    assert engine.item_status(P, HOSTILE) == (None, None)
    r.sadd(K.limited_in, f"site\0{held}/in")  # between bloom_add and hold_limited
    assert engine.item_status(P, f"{held}/in") == ("todo", None)
    assert engine.item_place(P, HOSTILE_LONG)["status"] is None
    assert engine.item_place(P, held) == place(status="todo", queue="limited", limit="site")
    assert classified == []


# -- item status for URL names in every place ----------------------------------------------------

URL_NAMES = [
    "https://example.org/a b/c?d=%20e&f=1#frag",
    "http://user:pw@example.org:8080/%E2%98%BA/?q=a%2Fb#x y",
    "https://example.org/p?" + "k=%41%25&" * 300 + "#end",  # about 2.7 KB
    "https://example.org/" + "seg%20ment/" * 370,  # about 4 KB
]
# Names without '/' (the route takes any name; these check the one-segment case too).
SEGMENT_NAMES = [
    "https:example.org?a b=%20c&d#frag",
    "search?q=" + "%41 b#c&" * 400,  # about 3.2 KB
]


def place_items(engine, r, urls, ctx):
    """Put names made from URLS in every place an item can be; return {name: (status, who)}.

    The names go in through the core intake: some are longer than the admin verbs take."""
    project_verbs.create(ctx, P)
    queued = []
    for queue in ("todo", "backfeed", "secondary", "redo"):
        names = [f"{url}&{queue}" for url in urls]
        intake.add_names(r, K, names, queue)
        queued += names
    # Out and done: claim everything queued so far, then finish half of it.
    status, out = engine.claim(P, "alice", "127.0.0.1", 1000)
    assert status == 200 and sorted(out) == sorted(queued)
    finished = out[: len(out) // 2]
    assert engine.done(P, "alice", "1", finished, [], "id").new == len(finished)
    expected = {name: ("done", None) if name in finished else ("out", "alice") for name in out}
    for queue in ("todo", "backfeed", "secondary", "redo"):
        names = [f"{url}&again-{queue}" for url in urls]
        intake.add_names(r, K, names, queue)
        expected.update({name: ("todo", None) for name in names})
    # Held by a limit: in its sub-queue, and on the way in (between bloom_add and hold_limited).
    limit_verbs.add(ctx, P, "held", "regex:&held", "1/m")
    held = [f"{url}&held" for url in urls]
    intake.add_names(r, K, held)
    assert r.zcard(K.limited) == len(held)
    arriving = [f"{url}&held-arriving" for url in urls]
    r.sadd(K.limited_in, *[f"held\0{name}" for name in arriving])
    expected.update({name: ("todo", None) for name in held + arriving})
    expected.update({f"{url}&never": (None, None) for url in urls})
    return expected


def test_item_status_answers_for_url_names_in_every_place(engine, r, ctx):
    expected = place_items(engine, r, URL_NAMES, ctx)
    assert max(len(name) for name in expected) > 4000
    assert {name: engine.item_status(P, name) for name in expected} == expected


def test_item_status_over_http_for_names_in_every_place(engine, r, web, ctx):
    expected = place_items(engine, r, SEGMENT_NAMES, ctx)
    assert max(len(name) for name in expected) > 3000
    for name, (status, who) in expected.items():
        res = web.simulate_get(f"/{P}/items/{quote(name, safe='')}.json")
        assert res.status_code == 200 and legacy(res.json) == {"status": status, "downloader": who}, name


def test_item_status_over_http_for_a_name_with_slashes(engine, r, web, ctx):
    project_verbs.create(ctx, P)
    item_verbs.add(ctx, P, [URL_NAMES[0]])
    res = web.simulate_get(f"/{P}/items/{quote(URL_NAMES[0], safe='')}.json")
    assert legacy(res.json) == {"status": "todo", "downloader": None}


def test_item_status_through_the_real_server_for_url_names(engine, r, live_server, ctx):
    # bjoern decodes the path before routing: "%2F" becomes "/", and "http://" keeps its "//".
    import urllib.request

    project_verbs.create(ctx, P)
    item_verbs.add(ctx, P, URL_NAMES)
    status, claimed = engine.claim(P, "alice", "10.0.0.1", 1)
    for name in URL_NAMES:
        with urllib.request.urlopen(
            f"{live_server.base}/{P}/items/{quote(name, safe='')}.json", timeout=10
        ) as res:
            body = json.loads(res.read())
        expected = (
            {"status": "out", "downloader": "alice"}
            if name in claimed
            else {"status": "todo", "downloader": None}
        )
        assert legacy(body) == expected, name


@pytest.fixture
def ctx(redis_url):
    return AdminContext.from_url(redis_url)
