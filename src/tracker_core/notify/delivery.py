"""Delivering the outbox: a JSON POST per delivery, signed, with a short timeout and no
redirects; and Notifier, the detector's and the deliverer's threads in `tracker maintain`.

Neither thread runs on a warrior's request path or inside a maintenance pass: a receiver that
hangs holds one deliverer worker for at most the timeout, and nothing else waits for it.
Receivers are admin-configured: a URL naming an internal address is the admin's choice (the
tracker POSTs where it is told, from the maintainer's host), but a redirect is never followed
(a 3xx is a failed attempt) and no proxy from the environment is used.
"""

from __future__ import annotations

import logging
import threading
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from tracker_core.infra.redis_clock import RedisClock
from tracker_core.notify import hooks, outbox, signing
from tracker_core.notify.detect import Detector
from tracker_core.notify.events import Thresholds

USER_AGENT = "tracker-webhooks/1"


@dataclass(frozen=True)
class DeliveryPolicy:
    """How hard a delivery is tried (the `tracker maintain --webhook-...` options)."""

    timeout_s: float = 5.0  # connect and answer, per attempt
    attempts: int = 12  # then dropped and counted
    retry_base_s: float = 10.0  # the first wait; doubled after each failure
    retry_max_s: float = 3600.0
    workers: int = 4  # deliveries in flight at once per maintainer

    @property
    def claim_ms(self) -> int:
        """How long a claimed delivery is held: well past an attempt's timeout."""
        return int((2 * self.timeout_s + 10) * 1000)


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None  # the 3xx comes back as an HTTPError: a failed attempt


OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirects())


def post(url: str, raw: bytes, headers: dict, timeout_s: float) -> tuple[bool, str]:
    """POST RAW to URL: (whether the receiver took it, with a 2xx; the status in a few words)."""
    request = urllib.request.Request(url, data=raw, headers=headers, method="POST")
    try:
        with OPENER.open(request, timeout=timeout_s) as answer:
            answer.read(65536)
            return 200 <= answer.status < 300, f"HTTP {answer.status}"
    except urllib.error.HTTPError as exc:
        return False, f"HTTP {exc.code}" + (" (redirects are not followed)" if 300 <= exc.code < 400 else "")
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        return False, f"{type(reason).__name__}: {reason}"[:200]


class Deliverer:
    """Claims due deliveries as HOLDER and POSTs them, WORKERS at a time."""

    def __init__(
        self, client, holder: str, policy: DeliveryPolicy = DeliveryPolicy(), clock: RedisClock | None = None
    ):
        self.client = client
        self.holder = holder
        self.policy = policy
        self.clock = clock or RedisClock(max_offset_s=0)
        self.lock = threading.Lock()  # the clock is not thread-safe

    def now_ms(self) -> int:
        with self.lock:
            return int(self.clock.now(self.client, checked=False) * 1000)

    def run_once(self, pool: ThreadPoolExecutor | None = None) -> int:
        """Deliver what is due now (one claim of up to WORKERS); how many were claimed."""
        claimed = outbox.claim(
            self.client, self.holder, self.now_ms(), self.policy.claim_ms, self.policy.workers
        )
        if pool is None or len(claimed) < 2:
            for delivery_id, record in claimed:
                self.deliver(delivery_id, record)
        else:
            list(pool.map(lambda pair: self.deliver(*pair), claimed))
        return len(claimed)

    def deliver(self, delivery_id: str, record: dict) -> str:
        """Try one claimed delivery; its outcome."""
        hook = hooks.get(self.client, record["hook"])
        if hook is None:
            outbox.finish(
                self.client, self.holder, delivery_id, record, "gone", "hook removed", self.now_ms()
            )
            return "gone"
        record["attempts"] += 1
        sent_ms = self.now_ms()
        raw = signing.body(record["event"], record["attempts"], sent_ms)
        ok, status = post(
            hook.url,
            raw,
            signing.headers(hook.secret, record["event"], raw, sent_ms, USER_AGENT),
            self.policy.timeout_s,
        )
        now_ms = self.now_ms()
        if ok:
            outcome, retry_ms = "delivered", 0
        elif record["attempts"] >= self.policy.attempts:
            outcome, retry_ms = "dropped", 0
        else:
            p = self.policy
            outcome = "retry"
            retry_ms = now_ms + int(
                outbox.backoff_s(record["attempts"], p.retry_base_s, p.retry_max_s) * 1000
            )
        outbox.finish(self.client, self.holder, delivery_id, record, outcome, status, now_ms, retry_ms)
        return outcome


class Notifier:
    """The detector and the deliverer on two threads of their own (start/stop), checking every
    INTERVAL_S; the deliverer is woken at once when this node's detector queued something."""

    def __init__(
        self,
        client,
        holder: str,
        thresholds: Thresholds = Thresholds(),
        policy: DeliveryPolicy = DeliveryPolicy(),
        interval_s: float = 0.5,
        log=None,
        detector: Detector | None = None,
    ):
        self.detector = detector or Detector(client, thresholds, holder=holder)
        self.deliverer = Deliverer(client, holder, policy)
        self.interval_s = interval_s
        self.log = log or logging.getLogger("tracker.notify").warning
        self.stop_event = threading.Event()
        self.wake = threading.Event()
        self.threads: list[threading.Thread] = []

    def start(self) -> None:
        self.stop_event.clear()
        self.threads = [
            threading.Thread(
                target=self._loop, args=("detector", self._detect), name="notify-detect", daemon=True
            ),
            threading.Thread(
                target=self._loop, args=("deliverer", self._deliver), name="notify-deliver", daemon=True
            ),
        ]
        for thread in self.threads:
            thread.start()

    def stop(self, timeout_s: float = 10.0) -> None:
        self.stop_event.set()
        self.wake.set()
        for thread in self.threads:
            thread.join(timeout_s)
        try:  # another maintainer's detector takes over at once, not when the lease expires
            self.detector.release()
        except Exception:  # noqa: BLE001 - Redis may be gone; the lease expires
            pass

    def _detect(self) -> None:
        if self.detector.check():
            self.wake.set()
        self.stop_event.wait(self.interval_s)

    def _deliver(self) -> None:
        with ThreadPoolExecutor(self.deliverer.policy.workers, "notify-post") as pool:
            while not self.stop_event.is_set():
                if self.deliverer.run_once(pool) < self.deliverer.policy.workers:
                    self.wake.wait(self.interval_s)  # none left due: wait for the next
                    self.wake.clear()

    def _loop(self, name: str, step) -> None:
        """Run STEP until stopped; a failure (Redis gone, a bug) is logged in one line and
        retried after a back-off that doubles up to 30 s."""
        failures = 0
        while not self.stop_event.is_set():
            try:
                step()
                failures = 0
            except Exception as exc:  # noqa: BLE001 - the thread must outlive any one failure
                failures += 1
                delay = min(30.0, self.interval_s * 2 ** min(failures, 10))
                self.log(
                    f"webhook {name} failed ({type(exc).__name__}: {exc}".splitlines()[0]
                    + f"); next try in {delay:.1f}s"
                )
                self.stop_event.wait(delay)
