"""Redis state as a value, to prove a refused request changed nothing."""

from tracker_core.keyspace import ADMIN_TOKENS_USED, GLOBAL_STATS


def contents(r):
    """Every key's contents (not its DUMP: a read may take a step of a hash's incremental
    rehash, which reorders its DUMP without changing it)."""
    state = {}
    for key in r.scan_iter():
        state[key] = {
            "set": r.smembers,
            "zset": lambda k: r.zrange(k, 0, -1, withscores=True),
            "hash": r.hgetall,
            "string": r.dump,  # dump: bitmaps are not text
            "stream": lambda k: r.xrange(k),
            "list": lambda k: r.lrange(k, 0, -1),
        }[r.type(key)](key)
    return state


def snapshot(r):
    """Everything in Redis except the counters and the tokens' last uses (a request refused
    for its input used its token), to prove a refused request changed nothing."""
    return {
        key: value
        for key, value in contents(r).items()
        if not (key.endswith(":stats") or key in (GLOBAL_STATS, ADMIN_TOKENS_USED))
    }
