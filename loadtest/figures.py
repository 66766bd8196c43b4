"""The figures operators watch, counted per Locust process and merged on the master.

Pure Python on purpose (no Locust, no gevent): the tests import it in the pytest process, and
workers ship ``export()`` dicts to the master, which ``merge()``s them.

IRSR (item request serve rate) is the share of ``/request`` calls that got an item, counted only
while items remained. A request that got no item (404, 429, any other answer, a broken connection,
a 200 without ``item_name``) is a miss if it *finished* before the last successful claim *started*:
at that moment the items handed out later were still queued. (Items that come back through a
release or a reclaim blur this; the load test releases nothing. Across machines the comparison
trusts their clocks.)
"""

from __future__ import annotations

import math

COUNTERS = (
    "requests",  # every POST .../request
    "requests_served",  # ... that got at least one item
    "requests_empty",  # 200 without item_name (the client waits and retries)
    "bad_answers",  # 200 whose body is not JSON (the client fails the item)
    "no_items_404",
    "rate_limited_429",
    "refused_4xx",  # any other 4xx on /request (403, 455, 400...)
    "server_5xx",  # on any endpoint
    "transport_errors",  # timeouts, refused or reset connections, on any endpoint
    "items_claimed",
    "items_done",  # names in a done answered OK
    "items_failed",  # left out of done on purpose
    "items_abandoned",  # claimed and never reported (exercises reclaiming)
    "claims_abandoned",
    "done_calls",
    "done_not_ok",  # a done answered with anything but 200 OK (the client retries it)
    "backfeed_posts",
    "backfeed_items_new",
    "backfeed_items_repeat",
    "backfeed_errors",
)
PERCENTILES = (0.5, 0.95, 0.99)


def rtt_bucket_ms(rtt_s: float) -> int:
    """Round a round-trip time to 2 significant digits in ms, so histograms stay small."""
    ms = max(0, round(rtt_s * 1000))
    if ms < 100:
        return ms
    magnitude = 10 ** (len(str(ms)) - 2)
    return round(ms / magnitude) * magnitude


def percentile(histogram: dict[int, int], fraction: float) -> int | None:
    """Return the smallest bucket at or below which FRACTION of the samples lie."""
    total = sum(histogram.values())
    if not total:
        return None
    wanted = max(1, math.ceil(total * fraction))
    seen = 0
    for bucket in sorted(histogram):
        seen += histogram[bucket]
        if seen >= wanted:
            return bucket
    return max(histogram)


class Figures:
    """Counters, an RTT histogram and the timing facts IRSR needs; mergeable across processes."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.counts = dict.fromkeys(COUNTERS, 0)
        self.rtt_ms: dict[int, int] = {}
        self.unserved_end_times: list[float] = []
        self.last_served_start: float | None = None
        self.first_time: float | None = None
        self.last_time: float | None = None
        # whole wall-clock second -> [requests, served, items claimed, items done, RTT ms summed]
        self.timeline: dict[int, list[int]] = {}

    # -- counting (one process) -------------------------------------------------------------------

    def _seen(self, start: float, end: float) -> None:
        self.first_time = start if self.first_time is None else min(self.first_time, start)
        self.last_time = end if self.last_time is None else max(self.last_time, end)

    def add(self, name: str, n: int = 1) -> None:
        self.counts[name] += n

    def _tick(self, at: float, column: int, n: int) -> None:
        row = self.timeline.setdefault(int(at), [0, 0, 0, 0, 0])
        row[column] += n

    def record_request(self, start: float, end: float, outcome: str, items: int = 0) -> None:
        """Count one /request call.

        OUTCOME is served, empty, bad_answer, no_items, rate_limited, refused, server_error or
        transport_error; START and END are wall-clock seconds.
        """
        self._seen(start, end)
        self.counts["requests"] += 1
        self._tick(end, 0, 1)
        if outcome == "served":
            self.counts["requests_served"] += 1
            self.counts["items_claimed"] += items
            self._tick(end, 1, 1)
            self._tick(end, 2, items)
            if self.last_served_start is None or start > self.last_served_start:
                self.last_served_start = start
            return
        self.unserved_end_times.append(end)
        field = {
            "empty": "requests_empty",
            "bad_answer": "bad_answers",
            "no_items": "no_items_404",
            "rate_limited": "rate_limited_429",
            "refused": "refused_4xx",
            "server_error": "server_5xx",
            "transport_error": "transport_errors",
        }[outcome]
        self.counts[field] += 1

    def record_done(self, claimed_at: float, end: float, items: int) -> None:
        """Count a done of ITEMS names answered OK, claimed at CLAIMED_AT: one RTT sample each."""
        self._seen(claimed_at, end)
        self.counts["items_done"] += items
        bucket = rtt_bucket_ms(end - claimed_at)
        self.rtt_ms[bucket] = self.rtt_ms.get(bucket, 0) + items
        self._tick(end, 3, items)
        self._tick(end, 4, bucket * items)

    # -- shipping (worker -> master) --------------------------------------------------------------

    def export(self) -> dict:
        """Return everything counted as plain data (msgpack- and JSON-safe)."""
        return {
            "counts": dict(self.counts),
            "rtt_ms": [[b, n] for b, n in self.rtt_ms.items()],
            "unserved_end_times": list(self.unserved_end_times),
            "last_served_start": self.last_served_start,
            "first_time": self.first_time,
            "last_time": self.last_time,
            "timeline": [[second, *row] for second, row in self.timeline.items()],
        }

    def merge(self, data: dict) -> None:
        """Add an ``export()`` of another process (or of an earlier report) to these figures."""
        for name, n in data["counts"].items():
            self.counts[name] = self.counts.get(name, 0) + n
        for bucket, n in data["rtt_ms"]:
            self.rtt_ms[int(bucket)] = self.rtt_ms.get(int(bucket), 0) + n
        self.unserved_end_times.extend(data["unserved_end_times"])
        theirs = data["last_served_start"]
        if theirs is not None and (self.last_served_start is None or theirs > self.last_served_start):
            self.last_served_start = theirs
        if data["first_time"] is not None:
            self._seen(data["first_time"], data["last_time"])
        for second, *row in data.get("timeline", ()):
            mine = self.timeline.setdefault(int(second), [0, 0, 0, 0, 0])
            for column, n in enumerate(row):
                mine[column] += n

    # -- the figures ------------------------------------------------------------------------------

    def misses_while_items_remained(self) -> int:
        if self.last_served_start is None:
            return 0
        return sum(1 for t in self.unserved_end_times if t < self.last_served_start)

    def summary(self) -> dict:
        """Return the operator's figures: IRSR, RTT percentiles, rates and every counter."""
        c = self.counts
        misses = self.misses_while_items_remained()
        counted = c["requests_served"] + misses
        span_s = (self.last_time - self.first_time) if self.first_time is not None else 0.0
        rtt_samples = sum(self.rtt_ms.values())
        rtt_sum = sum(b * n for b, n in self.rtt_ms.items())
        rtt_mean = rtt_sum / rtt_samples if rtt_samples else None

        def per_s(n):
            return round(n / span_s, 2) if span_s > 0 else None

        return {
            "irsr": round(c["requests_served"] / counted, 6) if counted else None,
            "irsr_requests_counted": counted,
            "misses_while_items_remained": misses,
            "rtt_ms": {
                "samples": rtt_samples,
                "mean": round(rtt_mean, 1) if rtt_mean is not None else None,
                **{f"p{int(p * 100)}": percentile(self.rtt_ms, p) for p in PERCENTILES},
            },
            "span_s": round(span_s, 3),
            "requests_per_s": per_s(c["requests"]),
            "items_claimed_per_s": per_s(c["items_claimed"]),
            "items_done_per_s": per_s(c["items_done"]),
            "counts": dict(c),
            "timeline": self.timeline_rows(),
        }

    def timeline_rows(self) -> list[dict]:
        """Return one row per second (by the answers' wall clock), for plots over time.

        ``served_share`` is the plain share of /request answered with items in that second (it
        drops to 0 once the queue is empty, as it should); ``rtt_mean_ms`` is over the items
        reported done in that second.
        """
        if not self.timeline:
            return []
        origin = min(self.timeline)
        rows = []
        for second in sorted(self.timeline):
            requests, served, claimed, done, rtt_sum = self.timeline[second]
            rows.append(
                {
                    "t_s": second - origin,
                    "requests": requests,
                    "served": served,
                    "served_share": round(served / requests, 4) if requests else None,
                    "items_claimed": claimed,
                    "items_done": done,
                    "rtt_mean_ms": round(rtt_sum / done, 1) if done else None,
                }
            )
        return rows


def threshold_failures(
    summary: dict, min_irsr: float, max_5xx: int, max_done_not_ok: int, max_backfeed_errors: int = 0
) -> list[str]:
    """Return one line per threshold that SUMMARY breaks (empty when the run passes)."""
    failures = []
    c = summary["counts"]
    if summary["irsr"] is not None and summary["irsr"] < min_irsr:
        failures.append(
            f"IRSR {summary['irsr']:.4f} below {min_irsr} while items remained "
            f"({summary['misses_while_items_remained']} misses)"
        )
    if c["requests"] and summary["irsr"] is None:
        failures.append("no /request got an item")
    if c["server_5xx"] > max_5xx:
        failures.append(f"{c['server_5xx']} answers with 5xx (at most {max_5xx} allowed)")
    if c["done_not_ok"] > max_done_not_ok:
        failures.append(
            f"{c['done_not_ok']} done calls not answered 200 OK (at most {max_done_not_ok} allowed)"
        )
    if c["backfeed_errors"] > max_backfeed_errors:
        failures.append(
            f"{c['backfeed_errors']} backfeed posts failed (at most {max_backfeed_errors} allowed)"
        )
    return failures


def format_summary(summary: dict) -> str:
    """Render SUMMARY as the few lines printed at the end of a headless run."""
    c, rtt = summary["counts"], summary["rtt_ms"]
    irsr = "n/a" if summary["irsr"] is None else f"{summary['irsr'] * 100:.2f}%"
    lines = [
        "Warrior figures",
        (
            f"  IRSR while items remained  {irsr} of {summary['irsr_requests_counted']} requests "
            f"({summary['misses_while_items_remained']} misses)"
        ),
        (
            f"  RTT claim->done ms         mean {rtt['mean']}  p50 {rtt['p50']}  p95 {rtt['p95']}  "
            f"p99 {rtt['p99']}  ({rtt['samples']} items)"
        ),
        (
            f"  items claimed/s, done/s    {summary['items_claimed_per_s']}  "
            f"{summary['items_done_per_s']}  over {summary['span_s']} s"
        ),
        (
            f"  /request                   {c['requests']} total, {c['requests_served']} served, "
            f"{c['no_items_404']} 404, {c['rate_limited_429']} 429, {c['refused_4xx']} other 4xx, "
            f"{c['requests_empty']} empty"
        ),
        (
            f"  errors                     {c['server_5xx']} 5xx, {c['transport_errors']} transport, "
            f"{c['done_not_ok']} done not OK, {c['backfeed_errors']} backfeed"
        ),
        (
            f"  items                      {c['items_claimed']} claimed, {c['items_done']} done, "
            f"{c['items_failed']} failed, {c['items_abandoned']} abandoned"
        ),
    ]
    if c["backfeed_posts"]:
        lines.append(
            f"  backfeed                   {c['backfeed_posts']} posts, "
            f"{c['backfeed_items_new']} new, {c['backfeed_items_repeat']} repeats"
        )
    return "\n".join(lines)
