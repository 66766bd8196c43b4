"""Many warriors at once through the real server: no item lost, none counted twice."""

import random
import threading
from collections import Counter

import orjson
import pytest

from support.counters import totals
from support.http_warrior import post_once as call
from tracker_core.admin import item_verbs, project_verbs
from tracker_core.keyspace import ProjectKeys

P = "conc"
K = ProjectKeys(P)
ITEMS = 3000
WARRIORS = 12


def warrior(port, name, rng, sent, errors):
    """Claim batches until the queues are empty; finish most, repeat some, drop some, release some."""
    while True:
        status, body = call(
            port,
            f"/{P}/multi={rng.randint(1, 20)}//request",
            {"downloader": name, "api_version": "2", "version": "20240101.01"},
        )
        if status == 404:
            return
        if status != 200:
            errors.append((status, body))
            return
        names = orjson.loads(body)["item_name"].split("\0")
        rng.shuffle(names)
        cut = len(names) * 8 // 10
        finished, rest = names[: max(1, cut)], names[max(1, cut) :]
        release, keep = rest[: len(rest) // 2], rest[len(rest) // 2 :]
        done_body = {
            "downloader": name,
            "item": "\0".join(finished),
            "bytes": {"data": 10 * len(finished)},
            "version": "20240101.01",
            "id": {"n": len(finished)},
        }
        for _ in range(2 if rng.random() < 0.3 else 1):  # repeated dones, as after a lost answer
            status, text = call(port, f"/{P}/done", done_body)
            if (status, text) != (200, b"OK"):
                errors.append((status, text))
        sent.update({n: 1 for n in finished})
        if release:
            call(port, f"/{P}/release", {"downloader": name, "item": "\0".join(release)})
        if keep and rng.random() < 0.5:
            # Another downloader reports these (a reclaim handed elsewhere): counted for the sender.
            status, text = call(
                port,
                f"/{P}/done",
                {"downloader": "helper", "item": "\0".join(keep), "bytes": {"data": 10 * len(keep)}},
            )
            sent.update({n: 1 for n in keep})
            if (status, text) != (200, b"OK"):
                errors.append((status, text))


@pytest.mark.slow
def test_concurrent_warriors_keep_every_item_in_exactly_one_place(admin, live_server, r):
    project_verbs.create(admin, P)
    everything = {f"c{n:05d}" for n in range(ITEMS)}
    item_verbs.add(admin, P, sorted(everything))
    sent, errors, threads = Counter(), [], []
    for w in range(WARRIORS):
        rng = random.Random(w)
        threads.append(
            threading.Thread(target=warrior, args=(live_server.port, f"warrior{w}", rng, sent, errors))
        )
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads)
    assert errors == []

    todo = r.smembers(K.todo)
    out = set(r.zrange(K.out, 0, -1))
    done = r.smembers(K.done)
    # The invariant: every item in exactly one place, and nothing that was never added.
    assert todo | out | done == everything
    assert not (todo & out) and not (todo & done) and not (out & done)
    assert set(sent) == done  # done holds exactly what warriors reported
    assert set(r.hkeys(K.claims)) == out
    stats = totals(r, K.stats)
    assert stats["items_done"] == len(done)
    counts = {k: int(v) for k, v in r.hgetall(K.downloader_count).items()}
    assert sum(counts.values()) == len(done)
    held = {k: int(v) for k, v in r.hgetall(K.downloader_claims).items()}
    assert sum(held.values()) == len(out)
    assert all(v > 0 for v in held.values())
    owners = Counter(r.hget(K.claims, item).split("\t")[0] for item in out)
    assert dict(owners) == held
    assert stats["bytes_done"] == sum(int(v) for v in r.hgetall(K.domain_bytes).values())
    assert stats["bytes_done"] == sum(s for _, s in r.zrange(K.downloader_bytes, 0, -1, withscores=True))
    assert stats["bytes_done"] == 10 * len(done)
    assert stats.get("dones_unknown", 0) == 0
