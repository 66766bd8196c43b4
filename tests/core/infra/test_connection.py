"""One connection interface, one reply shape: the hot path's RawRedis and the admin paths'
redis-py client answer alike, names that are not UTF-8 included (tracker_core.infra.connection)."""

import redis

from tracker_core.infra import topology
from tracker_core.infra.rawredis import RawRedis
from tracker_core.scripts import wire

NAME = "https://example.com/a b?q=%20#x"
NOT_UTF8 = b"https://example.com/\xff\xfe?old=data"


def test_both_clients_answer_text_and_hashes_as_dicts(redis_url):
    raw_bytes = redis.Redis.from_url(redis_url)
    raw_bytes.hset("h", mapping={NAME: "1", b"f\xff": b"v\xfe"})
    raw_bytes.sadd("s", NOT_UTF8)
    hot, admin = RawRedis(redis_url), topology.admin_client(redis_url)
    try:
        assert hot.hgetall("h") == admin.hgetall("h") == {NAME: "1", "f\udcff": "v\udcfe"}
        assert hot.hgetall("missing") == admin.hgetall("missing") == {}
        (name,) = hot.execute_command("SMEMBERS", "s")
        assert [name] == list(admin.smembers("s")) and isinstance(name, str)
        # Sent back as read (as bytes: scripts.wire), through either client, it is the same
        # bytes in Redis.
        assert admin.sismember("s", wire(name)) and hot.execute_command("SISMEMBER", "s", wire(name)) == 1
        script = ("EVAL", "return {1, ARGV[1]}", 0, NAME)
        assert admin.execute_command(*script) == hot.execute_command(*script) == [1, NAME]
    finally:
        hot.close()
        admin.close()
