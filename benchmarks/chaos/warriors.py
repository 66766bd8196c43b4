"""Warrior threads over HTTP: claims, multi-claims, partial and repeated dones, releases, backfeed.

Each thread has its own seeded random generator. They retry after any non-200 as a real client
does, only faster (tenths of a second, not a minute), so a fault run keeps the server busy.
"""

from __future__ import annotations

import http.client
import random
import threading
import time

import orjson

from chaos.ledger import Ledger

TIMEOUT_S = 20.0  # what seesaw-kit gives a request
BACKOFF_S = 0.1


def call(
    port: int, method: str, path: str, body: bytes | None, headers: dict | None = None
) -> tuple[object, bytes]:
    """One request on its own connection (as the client does); status or an error name."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT_S)
    try:
        conn.request(
            method, path, body, {"Content-Type": "application/json", "Connection": "close", **(headers or {})}
        )
        res = conn.getresponse()
        return res.status, res.read()
    except TimeoutError:
        return "timeout", b""
    except (ConnectionError, http.client.HTTPException, OSError) as exc:
        return type(exc).__name__, b""
    finally:
        conn.close()


class Warrior(threading.Thread):
    def __init__(
        self,
        name: str,
        seed: int,
        port_of,
        project: str,
        ledger: Ledger,
        stop: threading.Event,
        draining: threading.Event,
        max_multi: int,
    ):
        super().__init__(name=name, daemon=True)
        self.downloader, self.rng = name, random.Random(seed)
        self.port_of, self.project, self.ledger = port_of, project, ledger
        self.stop, self.draining, self.max_multi = stop, draining, max_multi
        self.finished: list[str] = []  # items to report with the next done+request

    def post(self, route: str, path: str, body: dict) -> tuple[object, bytes, float, float]:
        sent = time.monotonic()
        status, text = call(self.port_of(), "POST", path, orjson.dumps(body))
        self.ledger.count(route, status)
        return status, text, sent, time.monotonic()

    def claim_body(self) -> dict:
        return {"downloader": self.downloader, "api_version": "2", "version": "20240101.01"}

    def done_body(self, items: list[str]) -> dict:
        return {
            **self.claim_body(),
            "item": "\0".join(items),
            "bytes": {"data": 10 * len(items)},
            "id": {"sha1": self.rng.getrandbits(64)},
        }

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                self.round()
            except Exception as exc:  # a bug in the warrior must not pass silently
                self.ledger.count("warrior-crash", type(exc).__name__)
                time.sleep(BACKOFF_S)

    def round(self) -> None:
        rng = self.rng
        if self.finished and self.draining.is_set():
            self.report(self.finished, repeats=1)
            self.finished = []
        multi = rng.choice((1, 1, 3, 10, 50, self.max_multi))
        base = f"/{self.project}/multi={multi}/" if multi > 1 or rng.random() < 0.5 else f"/{self.project}/"
        body = self.claim_body()
        if self.finished and rng.random() < 0.5:
            # done+request: report the previous batch and claim in one round trip.
            route, body = "done+request", {**self.done_body(self.finished), "api_version": "2"}
            path = base + "/done+request" if multi > 1 else f"/{self.project}/done+request"
            status, text, sent, received = self.post(route, path, body)
            if status in (200, 404):
                self.ledger.done_acked(self.downloader, self.finished, received)
                self.finished = []
        else:
            route = "request" if multi == 1 else "multi-request"
            status, text, sent, received = self.post(route, base + "/request", body)
        if status != 200:
            time.sleep(BACKOFF_S * (3 if status == 404 else 1))
            return
        items = orjson.loads(text)["item_name"].split("\0")
        self.ledger.handed_out(self.downloader, items, sent, received)
        self.work(items)

    def work(self, items: list[str]) -> None:
        rng = self.rng
        rng.shuffle(items)
        if self.draining.is_set():
            finished, released, dropped = items, [], []
        else:
            a, b = int(len(items) * 0.8), int(len(items) * 0.9)
            finished, released, dropped = items[: max(1, a)], items[max(1, a) : b], items[b:]
            if len(items) == 1 and rng.random() < 0.05:
                finished, dropped = [], items  # a whole batch failed: no done at all
        del dropped  # never reported: reclaims bring them back
        if finished and rng.random() < 0.3 and not self.draining.is_set():
            self.finished += finished  # next round's done+request reports them
        elif finished:
            self.report(finished, repeats=2 if rng.random() < 0.2 else 1)
        if released:
            self.ledger.giving_up(self.downloader, released)
            for _ in range(3):
                status, *_ = self.post(
                    "release",
                    f"/{self.project}/release",
                    {"downloader": self.downloader, "item": "\0".join(released)},
                )
                if status == 200 or self.stop.is_set():
                    break
                time.sleep(BACKOFF_S)

    def report(self, items: list[str], repeats: int) -> None:
        """done until acknowledged (the client retries forever), REPEATS times once it is."""
        acked = 0
        while acked < repeats and not self.stop.is_set():
            # Partial dones: a multi batch reported in parts, as a script that uploads as it goes.
            cut = self.rng.randint(1, len(items)) if len(items) > 1 and acked == 0 else len(items)
            for part in (items[:cut], items[cut:]):
                if not part:
                    continue
                while not self.stop.is_set():
                    status, text, _, received = self.post(
                        "done", f"/{self.project}/done", self.done_body(part)
                    )
                    if (status, text) == (200, b"OK"):
                        self.ledger.done_acked(self.downloader, part, received)
                        break
                    time.sleep(BACKOFF_S)
            acked += 1


class Backfeeder(threading.Thread):
    """Posts new items discovered by 'workers', most of them matching a limit, at BATCH per post."""

    RETRIES = 10

    def __init__(
        self,
        seed: int,
        port_of,
        project: str,
        secret: str,
        ledger: Ledger,
        stop: threading.Event,
        batch: int,
        posts: int,
        make_name,
    ):
        super().__init__(name="backfeeder", daemon=True)
        self.rng = random.Random(seed)
        self.port_of, self.project, self.secret, self.ledger = port_of, project, secret, ledger
        self.stop, self.batch, self.posts, self.make_name = stop, batch, posts, make_name
        self.sent = 0

    def run(self) -> None:
        previous: list[str] = []
        for n in range(self.posts):
            if self.stop.is_set():
                return
            items = [self.make_name(self.rng, n * self.batch + i) for i in range(self.batch)]
            if previous and self.rng.random() < 0.3:
                items[: len(items) // 10] = previous[: len(items) // 10]  # seen before: dropped
            body = b"\0".join(i.encode() for i in items) + b"\0"
            # Clients retry a failed post 10 times with exponential back-off; an item of a post
            # answered 200 at any attempt must be somewhere (seen ones were queued by an earlier
            # attempt), one never answered 200 may be in or not.
            for attempt in range(self.RETRIES):
                status, text = call(
                    self.port_of(), "POST", f"/backfeed/legacy/{self.project}-{self.secret}", body
                )
                self.ledger.count("backfeed", status)
                acked = status == 200 and orjson.loads(text).get("status_code") == 200
                if acked or self.stop.wait(min(5.0, 0.25 * 2**attempt)):
                    break
            self.ledger.backfed(items, acked, time.monotonic())
            self.sent += 1
            previous = items
            self.stop.wait(self.rng.uniform(0.5, 1.5))


class Prober(threading.Thread):
    """Claims one item and reports it done every PERIOD_S: when the write path works again."""

    PERIOD_S = 0.05

    def __init__(self, port_of, project: str, ledger: Ledger, stop: threading.Event):
        super().__init__(name="prober", daemon=True)
        self.port_of, self.project, self.ledger, self.stop = port_of, project, ledger, stop
        self.answers: list[tuple[float, float, object]] = []  # (sent, received, status)

    def run(self) -> None:
        body = {"downloader": "prober", "api_version": "2"}
        while not self.stop.is_set():
            sent = time.monotonic()
            status, text = call(self.port_of(), "POST", f"/{self.project}/request", orjson.dumps(body))
            received = time.monotonic()
            self.ledger.count("probe", status)
            self.answers.append((sent, received, status))
            if status == 200:
                items = orjson.loads(text)["item_name"].split("\0")
                self.ledger.handed_out("prober", items, sent, received)
                while not self.stop.is_set():
                    status, text = call(
                        self.port_of(),
                        "POST",
                        f"/{self.project}/done",
                        orjson.dumps({**body, "item": items[0]}),
                    )
                    self.ledger.count("probe-done", status)
                    if (status, text) == (200, b"OK"):
                        self.ledger.done_acked("prober", items, time.monotonic())
                        break
                    time.sleep(self.PERIOD_S)
            self.stop.wait(self.PERIOD_S)

    def recovered_after(self, t: float) -> float | None:
        """Seconds from T to the first answer (200 or 404) to a claim sent at or after T."""
        for sent, received, status in list(self.answers):
            if sent >= t and status in (200, 404):
                return received - t
        return None
