"""A warrior's two calls over real HTTP: for tests that watch a page while items get done, and
warriors that keep retrying through a Redis failover."""

from __future__ import annotations

import http.client
import json
import threading
import time
import urllib.request


def post_json(base: str, path: str, body: dict) -> tuple[int, str]:
    request = urllib.request.Request(
        base + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=10) as res:
        return res.status, res.read().decode()


def complete_over_http(
    base: str, project: str, downloader: str, n: int, nbytes: int, version: str = "1"
) -> list[str]:
    """Claim N items of PROJECT as DOWNLOADER and report them done with NBYTES in all."""
    status, body = post_json(
        base,
        f"/{project}/multi={n}/request",
        {"downloader": downloader, "api_version": "2", "version": version},
    )
    assert status == 200
    items = json.loads(body)["item_name"].split("\0")
    done = {
        "downloader": downloader,
        "version": version,
        "item": "\0".join(items),
        "bytes": {"data": nbytes},
        "id": {},
    }
    assert post_json(base, f"/{project}/done", done) == (200, "OK")
    return items


def post_once(port: int, path: str, body: dict) -> tuple[int, bytes]:
    """POST as a warrior does, on a connection of its own; one that breaks without an answer is
    status 0."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request(
            "POST", path, json.dumps(body), {"Content-Type": "application/json", "Connection": "close"}
        )
        response = conn.getresponse()
        return response.status, response.read()
    except (OSError, http.client.HTTPException):
        return 0, b""
    finally:
        conn.close()


class RetryingWarriors:
    """THREADS warriors that claim multi=MULTI of PROJECT on a server at PORT and report each batch
    done, retrying the done until it is answered OK (as seesaw does) and a claim after any other
    answer, 0.1 s apart; each stops at a 404 (nothing left to claim) or at ``stop()``.

    ``acknowledged``: every item a done was answered OK for; ``acked_at``: (sent, answered) of
    each such done (monotonic); ``errors``: (when, status) of every answer that was not a 200
    (0: none).
    """

    def __init__(self, port: int, project: str, threads: int = 4, multi: int = 5):
        self.port, self.project, self.multi = port, project, multi
        self.acknowledged: set[str] = set()
        self.acked_at: list[tuple[float, float]] = []
        self.errors: list[tuple[float, int]] = []
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self.threads = [threading.Thread(target=self._run, args=(f"warrior{i}",)) for i in range(threads)]

    def start(self) -> RetryingWarriors:
        for thread in self.threads:
            thread.start()
        return self

    def _failed(self, status: int) -> None:
        with self.lock:
            self.errors.append((time.monotonic(), status))
        time.sleep(0.1)

    def _run(self, name: str) -> None:
        while not self._stop.is_set():
            status, body = post_once(
                self.port,
                f"/{self.project}/multi={self.multi}/request",
                {"downloader": name, "api_version": "2"},
            )
            if status == 404:
                return
            if status != 200:
                self._failed(status)
                continue
            names = json.loads(body)["item_name"].split("\0")
            done = {"downloader": name, "item": "\0".join(names), "bytes": {"data": 1}}
            while not self._stop.is_set():
                sent = time.monotonic()
                status, body = post_once(self.port, f"/{self.project}/done", done)
                if status == 200 and body == b"OK":
                    with self.lock:
                        self.acknowledged.update(names)
                        self.acked_at.append((sent, time.monotonic()))
                    break
                self._failed(status)

    def wait_acknowledged(self, count: int, timeout_s: float = 20.0) -> None:
        deadline = time.monotonic() + timeout_s
        while len(self.acknowledged) < count:
            assert time.monotonic() < deadline, (
                f"{len(self.acknowledged)} of {count} dones acknowledged in time"
            )
            time.sleep(0.02)

    def join(self, timeout_s: float = 90.0) -> bool:
        """Wait for every warrior to finish; whether all did (the others are stopped)."""
        deadline = time.monotonic() + timeout_s
        for thread in self.threads:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
        finished = not any(thread.is_alive() for thread in self.threads)
        self.stop()
        return finished

    def stop(self) -> None:
        self._stop.set()
        for thread in self.threads:
            thread.join(timeout=35)
