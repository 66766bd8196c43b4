"""The warrior protocol as seesaw-kit 0.10.3 speaks it, each call timed as a Locust request event.

HTTP client: geventhttpclient (the library under Locust's FastHttpUser), used directly. It is
several times cheaper per request than requests/urllib3 under gevent, which matters when a few
load-generator cores must outrun a tracker, and used bare it sends exactly the headers we give it:
seesaw-kit's tornado client sends ``Connection: close`` (one TCP connection per call), and
geventhttpclient drops the socket whenever an answer says ``Connection: close``. With
``keep_alive`` the header is left out and the connection is reused.

What seesaw-kit sends (seesaw/tracker.py):
- GetItemFromTracker: POST TRACKER_URL + "/request" with ``{"downloader", "api_version": "2",
  "version"}``; grab scripts with multi=K use TRACKER_URL ``http://host/PROJECT/multi=K/``, so the
  path is ``/PROJECT/multi=K//request``.
- SendDoneToTracker: POST ``http://host/PROJECT/done`` with the body PrepareStatsForTracker built:
  the script's defaults (``downloader``, ``version``), then ``item``, ``bytes``, ``id``; the client
  wants the stripped body ``OK`` and retries anything else.
- Both: ``Content-Type: application/json``, User-Agent ``ArchiveTeam Warrior/0.10.3``, give up
  after 20 s.
"""

from __future__ import annotations

import gzip
import json
import time
from dataclasses import dataclass

import gevent
from geventhttpclient import HTTPClient
from geventhttpclient.url import URL
from locust.event import EventHook

SEESAW_VERSION = "0.10.3"
USER_AGENT = f"ArchiveTeam Warrior/{SEESAW_VERSION}"  # runner_type and warrior_build are empty
TIMEOUT_S = 20.0  # seesaw-kit: connect 20 s, whole request 20 s

# Fired for what happens to claimed items besides HTTP calls: failed=N (left out of done),
# abandoned=N (the whole claim dropped). The locustfile counts them into the figures.
item_outcome = EventHook()


class WarriorCallError(Exception):
    """A call the real client would retry: the message names the status and what it means."""


@dataclass
class Answer:
    status: int | None  # None: no HTTP answer (timeout, refused, reset)
    body: bytes
    started: float  # wall clock (time.time), comparable across machines
    elapsed_ms: float
    error: Exception | None = None


@dataclass
class Claim:
    names: list[str]
    claimed_at: float  # when the request was sent: RTT runs from here to the done's answer


def request_path(project: str, multi: int) -> str:
    """Return the path seesaw-kit posts to for a claim of MULTI items."""
    return f"/{project}/multi={multi}//request" if multi > 1 else f"/{project}/request"


class WarriorClient:
    """One warrior's connection to the tracker; every call fires Locust's ``request`` event.

    The event's ``context`` says what the call meant to the warrior (``warrior_call`` and its
    outcome), so listeners can count IRSR, RTT and the item figures without parsing names.
    """

    def __init__(
        self,
        base_url: str,
        project: str,
        downloader: str,
        version: str,
        request_event: EventHook,
        keep_alive: bool = False,
    ):
        url = URL(base_url)
        self.http = HTTPClient(
            url.host,
            url.port,
            ssl=url.scheme == "https",
            concurrency=1,
            connection_timeout=TIMEOUT_S,
            network_timeout=TIMEOUT_S,
        )
        self.project = project
        self.downloader = downloader
        self.version = version
        self.request_event = request_event
        self.headers = {"User-Agent": USER_AGENT, "Accept-Encoding": "gzip"}
        if not keep_alive:
            self.headers["Connection"] = "close"

    def close(self) -> None:
        self.http.close()

    def _post(self, path: str, body: bytes, content_type: str | None) -> Answer:
        headers = dict(self.headers)
        if content_type:
            headers["Content-Type"] = content_type
        started, t0 = time.time(), time.perf_counter()
        try:
            with gevent.Timeout(TIMEOUT_S):
                response = self.http.request("POST", path, body=body, headers=headers)
                try:
                    data = response.read()
                finally:
                    response.release()
            if response.get("content-encoding", "").lower() == "gzip":
                data = gzip.decompress(data)
            return Answer(response.status_code, data, started, (time.perf_counter() - t0) * 1000)
        except (gevent.Timeout, OSError, ValueError) as exc:  # HTTPParseError is a ValueError
            return Answer(
                None,
                b"",
                started,
                (time.perf_counter() - t0) * 1000,
                WarriorCallError(f"no answer: {type(exc).__name__}: {exc}"),
            )

    def _fire(self, name: str, answer: Answer, error: Exception | None, context: dict) -> None:
        self.request_event.fire(
            request_type="POST",
            name=name,
            response_time=answer.elapsed_ms,
            response_length=len(answer.body),
            response=None,
            context={"status": answer.status, **context},
            exception=error,
            start_time=answer.started,
        )

    # -- the calls --------------------------------------------------------------------------------

    def request_items(self, multi: int) -> Claim | None:
        """Ask for up to MULTI items; return the claim, or None when the client would retry."""
        body = {"downloader": self.downloader, "api_version": "2", "version": self.version}
        answer = self._post(request_path(self.project, multi), json.dumps(body).encode(), "application/json")
        name = f"/{self.project}/multi=K//request" if multi > 1 else f"/{self.project}/request"
        outcome, names, error = _request_outcome(answer, split=multi > 1)
        self._fire(name, answer, error, {"warrior_call": "request", "outcome": outcome, "items": len(names)})
        return Claim(names, answer.started) if names else None

    def send_done(self, claim: Claim, names: list[str], bytes_data: int) -> bool:
        """Report NAMES (the succeeded subset of CLAIM) done; True when the answer is 200 OK."""
        body = {
            "downloader": self.downloader,
            "version": self.version,
            "item": "\0".join(names),
            "bytes": {"data": bytes_data},
            "id": {"loadtest": True, "items": len(names)},
        }
        answer = self._post(f"/{self.project}/done", json.dumps(body).encode(), "application/json")
        ok = answer.status == 200 and answer.body.strip() == b"OK"
        error = answer.error or (
            None if ok else WarriorCallError(f"{answer.status} {answer.body.strip()[:60]!r} (client retries)")
        )
        self._fire(
            f"/{self.project}/done",
            answer,
            error,
            {
                "warrior_call": "done",
                "ok": ok,
                "items": len(names),
                "claimed_at": claim.claimed_at,
                "answered_at": answer.started + answer.elapsed_ms / 1000,
            },
        )
        return ok

    def backfeed(self, secret: str, names: list[str], new: int) -> bool:
        """POST discovered NAMES (the first NEW of them never sent before) to the backfeed."""
        body = ("\0".join(names) + "\0").encode("utf-8", "surrogateescape")
        answer = self._post(f"/backfeed/legacy/{self.project}-{secret}", body, None)
        ok = False
        if answer.status == 200:
            try:
                ok = json.loads(answer.body).get("status_code") == 200
            except (ValueError, AttributeError):
                ok = False
        error = answer.error or (
            None if ok else WarriorCallError(f"{answer.status} {answer.body.strip()[:60]!r}")
        )
        self._fire(
            "/backfeed/legacy/PROJECT-SECRET",
            answer,
            error,
            {"warrior_call": "backfeed", "ok": ok, "new": new, "repeat": len(names) - new},
        )
        return ok


def _request_outcome(answer: Answer, split: bool) -> tuple[str, list[str], Exception | None]:
    """Classify a /request answer as seesaw-kit would treat it: (outcome, names, error)."""
    status = answer.status
    if status is None:
        return "transport_error", [], answer.error
    if status == 200:
        try:
            data = json.loads(answer.body)
        except ValueError:
            return "bad_answer", [], WarriorCallError("200 with a body that is not JSON")
        if not isinstance(data, dict) or not data.get("item_name"):
            return "empty", [], WarriorCallError("200 without item_name (client waits)")
        item = data["item_name"]
        return "served", item.split("\0") if split else [item], None
    meaning = {404: "no_items", 429: "rate_limited", 420: "rate_limited"}.get(status)
    if meaning is None:
        meaning = "server_error" if status >= 500 else "refused"
    return meaning, [], WarriorCallError(f"{status} {meaning}")
