"""claim and done sent as ready RESP bytes (tracker_core.scripts.packed): the very bytes the
binding's own command packs to, the same replies and errors, and the binding whenever Redis
lost the script."""

import hashlib

import hiredis
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from support.projects import new_project
from tracker_core import scripts
from tracker_core.infra.rawredis import RawRedis
from tracker_core.items.engine import Engine
from tracker_core.keyspace import ProjectKeys
from tracker_core.scripts import sending
from tracker_core.scripts.packed import PackedCall
from tracker_core.scripts.sending import ScriptError

P = "proj"
K = ProjectKeys(P)
NOW_MS = 1_795_000_000_000


def in_order(binding, call: dict) -> tuple:
    """CALL's keywords, defaults added, in the order a PackedCall takes them by position."""
    call = binding.call(dict(call))
    return tuple(call[name] for name in binding.params)


def plain_command(binding, k, **call) -> bytes:
    """What BINDING sends unpacked for CALL, packed by hiredis."""
    keys, argv = binding.keys(k, **call), binding.argv(k, **call)
    return hiredis.pack_command(("EVALSHA", binding.script.sha, len(keys), *keys, *argv))


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
    downloader_counted=st.booleans(),
    ip_counted=st.booleans(),
)
def test_a_packed_claim_is_the_command_the_binding_packs(project, offset_ms, **call):
    k = ProjectKeys(project)
    call["now_ms"] = NOW_MS + offset_ms
    packed = scripts.packed_claim()
    expected = plain_command(scripts.claim, k, **call)
    assert packed.payload(k, in_order(scripts.claim, call)) == expected
    assert packed.payload(k, in_order(scripts.claim, call)) == expected  # from the cached parts


@settings(max_examples=300, deadline=None)
@given(
    offset_ms=st.integers(0, 3 * 86_400_000),
    downloader=texts,
    version=texts,
    item_id=texts,
    ip=ips,
    domain_bytes=st.lists(st.tuples(texts, st.integers(0, 10**13)), max_size=4),
    items=st.lists(texts, min_size=1, max_size=5),
)
def test_a_packed_done_is_the_command_the_binding_packs(offset_ms, domain_bytes, **call):
    call.update(now_ms=NOW_MS + offset_ms, domain_bytes=[x for pair in domain_bytes for x in pair])
    packed = scripts.packed_done()
    expected = plain_command(scripts.done, K, **call)
    assert packed.payload(K, in_order(scripts.done, call)) == expected
    assert packed.payload(K, in_order(scripts.done, call)) == expected


def test_each_minute_gets_its_own_keys():
    packed = scripts.packed_claim()
    for now_ms in (NOW_MS, NOW_MS + 59_999, NOW_MS + 60_000, NOW_MS + 86_400_000):
        call = {"now_ms": now_ms, "downloader": "alice", "ip": "10.0.0.1", "wanted": 1}
        call |= {"counted_under": "1", "downloader_counted": True, "ip_counted": False}
        assert packed.payload(K, in_order(scripts.claim, call)) == plain_command(scripts.claim, K, **call)


def test_a_shard_s_keys_are_packed_apart_from_the_project_s():
    # The shard router calls with per-shard ProjectKeys of one project: templates and cached
    # parts are kept per keyspace, not per project name.
    class ShardKeys(ProjectKeys):  # a shard's keys under its own hash tag, TAG
        def __init__(self, project, tag):
            super().__init__(project)
            default = self.tag
            for name in self.__slots__:
                value = getattr(self, name)
                if isinstance(value, str) and value.startswith(default):
                    setattr(self, name, tag + value[len(default) :])

        def downloader_queue(self, downloader):
            return f"{self.tag}:todo:d:{downloader}"

        def minute(self, minute):
            return f"{self.tag}:minute:{minute}"

        def uniques(self, kind, day):
            return f"{self.tag}:uniq:{kind}:{day}"

    packed = scripts.packed_claim()
    call = {"now_ms": NOW_MS, "downloader": "alice", "ip": "10.0.0.1", "wanted": 1}
    call = scripts.claim.call(call)
    for k in (K, ShardKeys(P, "{proj.1}"), ShardKeys(P, "{proj.2}")):
        payload = packed.payload(k, in_order(scripts.claim, call))
        assert payload == plain_command(scripts.claim, k, **call)
        assert payload.count(k.tag.encode()) == 21


def test_only_a_binding_of_claim_s_or_done_s_shape_is_packed():
    with pytest.raises(ValueError, match="item_status"):
        PackedCall(scripts.item_status)  # a run of keys
    with pytest.raises(ValueError, match="release"):
        PackedCall(scripts.release, cache_args=True)  # a run of arguments kept packed


@pytest.fixture
def project(admin):
    return new_project(admin, P, [f"i{n}" for n in range(20)])


def twin_engines(redis_url, clock):
    """An engine on the packed path and one that always goes through the binding."""
    packed, plain = Engine(redis_url, clock=clock), Engine(redis_url, clock=clock)
    plain._claims.packed = plain._dones.packed = False
    return packed, plain


def test_the_packed_path_answers_as_the_binding_does(project, redis_url, clock, r, monkeypatch):
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
    assert done_a == done_b and type(done_a) is scripts.done.Reply
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


def test_a_script_error_is_raised_as_the_binding_raises_it(project, redis_url, clock, r):
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
    # sending.run tells "Redis has not loaded it" (NOT_LOADED) from a nil reply: a nil must not
    # send the script's source again, which would run its writes twice.
    source = "redis.call('INCR', ARGV[1]) return nil"
    script = scripts.Script("nil_reply", 0, source, hashlib.sha1(source.encode()).hexdigest())
    monkeypatch.setitem(scripts.SCRIPTS, "nil_reply", script)
    conn = RawRedis(redis_url)
    assert sending.run(conn, "nil_reply", (), ("runs",)) is None  # NOSCRIPT, then its source
    assert sending.run(conn, "nil_reply", (), ("runs",)) is None  # EVALSHA answers nil
    assert r.get("runs") == "2"
    assert (
        sending.run_packed(conn, "nil_reply", hiredis.pack_command(("EVALSHA", script.sha, 0, "runs")))
        is None
    )
    assert r.get("runs") == "3"
    r.script_flush()
    packed = hiredis.pack_command(("EVALSHA", script.sha, 0, "runs"))
    assert sending.run_packed(conn, "nil_reply", packed) is sending.NOT_LOADED
    assert r.get("runs") == "3"
