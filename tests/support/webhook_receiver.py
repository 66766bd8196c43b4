"""A webhook receiver for the tests: an http.server on loopback that records every POST
(arrival time, headers, raw body), answers a status of the test's choosing (failing the first N
times, say) or never answers at all."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tracker_core.notify import signing


class Receiver:
    """RECEIVED: (monotonic arrival, headers, raw body) per POST. FAIL_FIRST POSTs are answered
    FAIL_STATUS; with HANG, no POST is ever answered (until stop)."""

    def __init__(self, fail_first: int = 0, fail_status: int = 503, hang: bool = False, status: int = 204):
        self.received: list[tuple[float, dict, bytes]] = []
        self.fail_first, self.fail_status, self.hang, self.status = fail_first, fail_status, hang, status
        self.released = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                receiver.received.append((time.monotonic(), dict(self.headers), raw))
                if receiver.hang:
                    receiver.released.wait(60)
                    return
                failing = len(receiver.received) <= receiver.fail_first
                self.send_response(receiver.fail_status if failing else receiver.status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_port}/hook?via=test"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def events(self, name: str | None = None) -> list[dict]:
        """The bodies received (of event NAME only, when given), decoded."""
        bodies = [json.loads(raw) for _, _, raw in self.received]
        return [b for b in bodies if name is None or b["event"] == name]

    def has(self, count: int, timeout_s: float = 10.0) -> bool:
        """Whether COUNT POSTs came within TIMEOUT_S."""
        deadline = time.monotonic() + timeout_s
        while len(self.received) < count and time.monotonic() < deadline:
            time.sleep(0.02)
        return len(self.received) >= count

    def arrivals(self, name: str) -> list[float]:
        return [at for at, _, raw in self.received if json.loads(raw)["event"] == name]

    def all_signed(self, secret: str) -> bool:
        """Whether every POST carried a valid signature under SECRET and the headers that go with it."""
        return all(
            signing.verify(secret, raw, headers.get(signing.SIGNATURE_HEADER))
            and headers.get("Content-Type") == "application/json"
            and headers.get(signing.EVENT_ID_HEADER) == json.loads(raw)["id"]
            and int(headers.get(signing.TIMESTAMP_HEADER)) == json.loads(raw)["sent_ms"] // 1000
            for _, headers, raw in self.received
        )

    def stop(self) -> None:
        self.released.set()
        self.server.shutdown()
        self.server.server_close()
