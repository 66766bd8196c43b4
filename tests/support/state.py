"""Redis state as a value, to prove a refused request changed nothing."""

from tracker_core.keys import GLOBAL_STATS


def snapshot(r):
    """Everything in Redis except the counters, to prove a refused request changed nothing."""
    state = {}
    for key in r.scan_iter():
        kind = r.type(key)
        if key.endswith(":stats") or key == GLOBAL_STATS:
            continue
        state[key] = {
            "set": r.smembers,
            "zset": lambda k: r.zrange(k, 0, -1, withscores=True),
            "hash": r.hgetall,
            "string": r.dump,  # dump: bitmaps are not text
            "stream": lambda k: r.xrange(k),
        }[kind](key)
    return state
