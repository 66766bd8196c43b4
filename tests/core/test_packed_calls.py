"""claim and done sent as ready RESP bytes (tracker_core.packed_calls): the very bytes
script_calls' command packs to, the same replies and errors, and script_calls whenever the
command has another shape or Redis lost the script."""

import hashlib

import hiredis
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracker_core import packed_calls, script_calls, scripts
from tracker_core.admin import items, projects
from tracker_core.engine import Engine
from tracker_core.keys import ProjectKeys
from tracker_core.rawredis import RawRedis
from tracker_core.scripts import ScriptError

P = "proj"
K = ProjectKeys(P)
NOW_MS = 1_795_000_000_000


class Recorder:
    def execute_command(self, *args):
        self.command = args
        return [0, "0"]


def claim_command(k, now_ms, downloader, ip, wanted, counted_under, d_counted, ip_counted):
    recorder = Recorder()
    script_calls.claim(
        recorder,
        k,
        now_ms=now_ms,
        downloader=downloader,
        ip=ip,
        wanted=wanted,
        ip_key=packed_calls.blocks.ip_key(ip),
        counted_under=counted_under,
        downloader_counted=d_counted,
        ip_counted=ip_counted,
    )
    return hiredis.pack_command(recorder.command)


def done_command(k, now_ms, downloader, version, item_id, ip, domain_bytes, names):
    recorder = Recorder()
    script_calls.done(
        recorder,
        k,
        now_ms=now_ms,
        downloader=downloader,
        version=version,
        item_id=item_id,
        ip=ip,
        domain_bytes=domain_bytes,
        items=names,
    )
    return hiredis.pack_command(recorder.command)


texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)
ips = st.one_of(st.ip_addresses().map(str), texts)


@settings(max_examples=300, deadline=None)
@given(
    project=st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=20),
    offset_ms=st.integers(0, 3 * 86_400_000),
    downloader=texts,
    ip=ips,
    wanted=st.integers(1, 1000),
    counted_under=texts,
    d_counted=st.booleans(),
    ip_counted=st.booleans(),
)
def test_a_packed_claim_is_the_command_script_calls_packs(
    project, offset_ms, downloader, ip, wanted, counted_under, d_counted, ip_counted
):
    k = ProjectKeys(project)
    args = (NOW_MS + offset_ms, downloader, ip, wanted, counted_under, d_counted, ip_counted)
    commands = packed_calls.ClaimCommands()
    assert commands.payload(k, *args) == claim_command(k, *args)
    assert commands.payload(k, *args) == claim_command(k, *args)  # from the cached parts


@settings(max_examples=300, deadline=None)
@given(
    offset_ms=st.integers(0, 3 * 86_400_000),
    downloader=texts,
    version=texts,
    item_id=texts,
    ip=ips,
    domain_bytes=st.lists(st.tuples(texts, st.integers(0, 10**13)), max_size=4),
    names=st.lists(texts, min_size=1, max_size=5),
)
def test_a_packed_done_is_the_command_script_calls_packs(
    offset_ms, downloader, version, item_id, ip, domain_bytes, names
):
    flat = [x for pair in domain_bytes for x in pair]
    args = (NOW_MS + offset_ms, downloader, version, item_id, ip, flat, names)
    commands = packed_calls.DoneCommands()
    assert commands.payload(K, *args) == done_command(K, *args)
    assert commands.payload(K, *args) == done_command(K, *args)


def test_each_minute_gets_its_own_keys():
    commands = packed_calls.ClaimCommands()
    for now_ms in (NOW_MS, NOW_MS + 59_999, NOW_MS + 60_000, NOW_MS + 86_400_000):
        args = (now_ms, "alice", "10.0.0.1", 1, "1", True, False)
        assert commands.payload(K, *args) == claim_command(K, *args)


def test_a_command_of_another_shape_is_left_to_script_calls(monkeypatch):
    real = script_calls.claim

    def swapped(conn, k, **kw):  # a claim whose ARGV would no longer match the template
        kw["ip"], kw["ip_key"] = kw["ip_key"], kw["ip"]
        return real(conn, k, **kw)

    monkeypatch.setattr(script_calls, "claim", swapped)
    assert packed_calls.ClaimCommands().payload(K, NOW_MS, "alice", "10.0.0.1", 1, "", False, False) is None

    monkeypatch.setattr(script_calls, "done_keys", lambda k, d, now: (k.settings,) * 20)
    assert packed_calls.DoneCommands().payload(K, NOW_MS, "alice", "", "null", "", [], ["x"]) is None


@pytest.fixture
def project(admin):
    projects.create(admin, P)
    items.add(admin, P, [f"i{n}" for n in range(20)])
    return P


def twin_engines(redis_url, clock):
    """An engine on the packed path and one that always goes through script_calls."""
    packed, plain = Engine(redis_url, clock=clock), Engine(redis_url, clock=clock)
    plain._claims.packed = plain._dones.packed = False
    return packed, plain


def test_the_packed_path_answers_as_script_calls_does(project, redis_url, clock, r, monkeypatch):
    packed, plain = twin_engines(redis_url, clock)
    sent = []
    original = RawRedis.execute_packed

    def spy(self, payload):
        sent.append(payload)
        return original(self, payload)

    monkeypatch.setattr(RawRedis, "execute_packed", spy)
    a = packed.claim(P, "alice", "10.0.0.1", 3)
    b = plain.claim(P, "bob", "10.0.0.2", 3)
    assert a[0] == b[0] == 200 and len(a[1]) == len(b[1]) == 3
    assert len(sent) == 1
    assert packed.claim("nope", "alice", "10.0.0.1", 1) == plain.claim("nope", "alice", "10.0.0.1", 1)
    done_a = packed.done(P, "alice", "v1", [*a[1], "unknown"], ["d.example", 5], '{"x": 1}', "10.0.0.1")
    done_b = plain.done(P, "bob", "v1", [*b[1], "unknown"], ["d.example", 5], '{"x": 1}', "10.0.0.2")
    assert done_a == done_b and type(done_a) is script_calls.DoneReply
    assert done_a.new == 3 and done_a.unknown == 1
    assert packed.done("nope", "alice", "", ["x"], [], "null") is None
    assert plain.done("nope", "alice", "", ["x"], [], "null") is None
    assert len(sent) == 4


def test_a_script_redis_lost_is_loaded_again(project, engine, r):
    status, first = engine.claim(P, "alice", "10.0.0.1", 1)
    assert status == 200
    r.script_flush()
    status, second = engine.claim(P, "alice", "10.0.0.1", 1)
    assert status == 200 and second != first
    r.script_flush()
    assert engine.done(P, "alice", "", first + second, [], "null").new == 2


def test_a_script_error_is_raised_as_script_calls_raises_it(project, redis_url, clock, r):
    packed, plain = twin_engines(redis_url, clock)
    r.delete(K.todo)
    r.set(K.todo, "not a set")
    errors = []
    for engine in (packed, plain):
        with pytest.raises(ScriptError) as caught:
            engine.claim(P, "alice", "10.0.0.1", 1)
        errors.append(str(caught.value))
    assert errors[0] == errors[1] and errors[0].startswith("claim: ")


def test_a_wrapper_of_the_connection_sees_the_packed_claim_and_done(project, engine):
    # Counting or tracing wraps execute_command and execute_packed: claim and done take the
    # second (they are not unpacked again for a wrapped connection).
    sent = []
    execute, execute_packed = engine.conn.execute_command, engine.conn.execute_packed

    def counting(*args):
        sent.append(("command", args[0]))
        return execute(*args)

    def counting_packed(payload):
        sent.append(("packed", payload.split(b"\r\n")[2].decode()))
        return execute_packed(payload)

    engine.conn.execute_command, engine.conn.execute_packed = counting, counting_packed
    engine.claim(P, "warm", "10.0.0.9", 1)  # loads the scripts and the settings
    sent.clear()
    status, names = engine.claim(P, "alice", "10.0.0.1", 1)
    assert status == 200
    assert engine.done(P, "alice", "", names, [], "null").new == 1
    assert sent == [("packed", "EVALSHA"), ("packed", "EVALSHA")]


def test_a_script_whose_reply_is_nil_runs_once(redis_url, r, monkeypatch):
    # scripts.run tells "Redis has not loaded it" (NOT_LOADED) from a nil reply: a nil must not
    # send the script's source again, which would run its writes twice.
    source = "redis.call('INCR', ARGV[1]) return nil"
    script = scripts.Script("nil_reply", 0, source, hashlib.sha1(source.encode()).hexdigest())
    monkeypatch.setitem(scripts.SCRIPTS, "nil_reply", script)
    conn = RawRedis(redis_url)
    assert scripts.run(conn, "nil_reply", (), ("runs",)) is None  # NOSCRIPT, then its source
    assert scripts.run(conn, "nil_reply", (), ("runs",)) is None  # EVALSHA answers nil
    assert r.get("runs") == "2"
    assert (
        scripts.run_packed(conn, "nil_reply", hiredis.pack_command(("EVALSHA", script.sha, 0, "runs")))
        is None
    )
    assert r.get("runs") == "3"
    r.script_flush()
    packed = hiredis.pack_command(("EVALSHA", script.sha, 0, "runs"))
    assert scripts.run_packed(conn, "nil_reply", packed) is scripts.NOT_LOADED
    assert r.get("runs") == "3"
