"""What anonymous clients ask of the whole tracker, rendered off the warrior path.

An anonymous ``GET /metrics`` reads every listed project: 240 ms with 300 projects and 0.9 s with
1,500, once computed in the bjoern worker that also serves warriors, so eight clients looping on
it held every warrior's claim for a second. The same holds, smaller, for the front page,
``projects.json`` (and the same document in every warrior's heartbeat answer) and each project's
``stats.json``. Here they are rendered by one process of their own, the renderer, which
``tracker serve`` forks beside the workers at a lower CPU priority, and the workers answer from
its files:

- a file at most ``max_age_s`` old is served as it is (a stat and, when it changed, one read);
- an older one is served too, once the renderer has been asked for a new one (one datagram on a
  Unix socket) and given FRESH_WAIT_S to write it: small aggregates come back fresh, big ones
  (hundreds of projects) a render old;
- with none (the first ask of that key, or only a file past STALE_S), the worker asks; a
  stats.json it answers itself, INLINE_PER_S a second at most (one project's figures: their cost
  does not grow with the number of projects); otherwise it waits up to COLD_WAIT_S, then answers
  503 with ``Retry-After: 1`` ("being prepared"). The renderer
  renders the front page, projects.json and /metrics when it starts, and the workers wait for
  those before they take their first connection, so those are never cold.

A worker's waits are capped at COLD_BUDGET_S a second in all (5% of its time): keys are bounded
by what exists (projects x parameters), but a client can vary ``downloader=`` or the Host header
to ask for a new key every time, and past the budget such asks are answered at once.

A flood of answers already rendered still costs their bytes: 1,800 answers a second of a 1 MB
/metrics kept both cores busy copying 2 GB/s on loopback. So each worker sends at most
BYTES_PER_S of them a second (a token bucket, bursts of one second's worth) and answers past that
429 with ``Retry-After: 1``: 32 MB/s, some 30 scrapes a second of /metrics with 300 projects, or
350 front pages, per worker.

The renderer renders a key only when asked and its file is older than ``max_age_s``, one at a time,
so a flood costs at most one low-priority core and a stat per request in the workers, whatever
the number of projects. It renders through the app's own resources (a request it makes to the
Falcon app, marked so the request metrics do not count it), so a cached answer is byte for byte
what the route answers. Files older than STALE_S, and the oldest past MAX_FILES_BYTES, are
removed.

Without a renderer (an app built by a test, ``create_app`` alone) every route answers inline as it
always did. docs/operations.md, "Anonymous aggregates", has the figures.

This module is the workers' side: which requests are cached, under what key, and the budgets of
their waits and bytes. The files are rendered_files.py; the renderer is public_renderer.py.
"""

from __future__ import annotations

import time
import urllib.parse

from tracker_api.public.public_renderer import RENDERING_ENV
from tracker_api.public.rendered_files import DEFAULT_MAX_AGE_S, MAX_KEY_CHARS, STALE_S, Entry, Store
from tracker_api.web.token_bucket import TokenBucket
from tracker_core import keyspace

FRESH_WAIT_S = 0.01  # for a new render of a file past max_age_s (it is served if none comes)
COLD_WAIT_S = 0.05  # for a first render, with nothing to serve meanwhile
COLD_BUDGET_S = 0.05  # all such waits of one worker in one second
COLD_POLL_S = 0.001
# A first ask of a stats.json (one project's figures: its cost follows that project, not the
# number of projects) is answered by the worker itself this often; past it, it waits for the
# renderer. A flood of new parameters (downloader=) costs a worker at most this many a second.
INLINE_PER_S = 2.0
INLINE_BURST = 4.0
BYTES_PER_S = 32 << 20  # of rendered answers one worker sends a second; past it 429
WARM_WAIT_S = 10.0  # what a starting worker gives the renderer's first renders

# Anonymous routes of whole-tracker aggregates: path -> (route template, query parameters read,
# whether the Host header is part of the answer). stats.json is matched by pattern below.
FIXED_ROUTES = {
    "/metrics": ("/metrics", (), False),
    "/": ("/", (), False),
    "/projects.json": ("/projects.json", (), True),
}
STATS_TEMPLATE = "/{project}/stats.json"
STATS_PARAMETERS = ("top", "range", "downloader")


def cache_key(environ, engine, public_url: str) -> tuple[str, str] | None:
    """(key, route template) of an anonymous GET or HEAD the renderer answers, or None: the
    request goes to the app as it is (not cacheable, authenticated, or an unknown project)."""
    path = environ.get("PATH_INFO") or "/"
    if len(path) > 1 and path.endswith("/"):  # Falcon strips it too: the same route
        path = path.rstrip("/") or "/"
    fixed = FIXED_ROUTES.get(path)
    if fixed is not None:
        template, _, by_host = fixed
        if path == "/metrics" and environ.get("HTTP_AUTHORIZATION") is not None:
            return None  # Prometheus with its token: answered fresh, and a wrong one refused
        if by_host:
            return projects_key(environ.get("HTTP_HOST"), public_url), template
        return f"{path}\n\n", template
    if not path.endswith("/stats.json"):
        return None
    project = path[1 : -len("/stats.json")]
    if not keyspace.valid_project_name(project) or engine.settings(project) is None:
        return None  # the app answers 404 at once (an unknown project is cached negatively)
    query = environ.get("QUERY_STRING", "")
    chosen = {}
    if query:
        for name, value in urllib.parse.parse_qsl(query, keep_blank_values=True):
            if name in STATS_PARAMETERS and name not in chosen:
                chosen[name] = value
    return f"{path}\n{urllib.parse.urlencode(sorted(chosen.items()))}\n", STATS_TEMPLATE


def projects_key(host: str | None, public_url: str) -> str:
    """projects.json's key: its URLs come from the Host header unless a public URL is set."""
    return f"/projects.json\n\n{'' if public_url else host or ''}"


def warm_keys() -> tuple[str, ...]:
    """The keys rendered when the renderer starts: the anonymous whole-tracker routes."""
    return tuple(f"{path}\n\n" for path in FIXED_ROUTES)


def wait_warm(store: Store, keys: tuple[str, ...], timeout_s: float = WARM_WAIT_S) -> bool:
    """Until the renderer has written KEYS (a worker waits before its first accept, so nobody
    meets a cold front page or /metrics after a start; the connections wait in the listen
    queue meanwhile), at most TIMEOUT_S; whether it had."""
    deadline = time.monotonic() + timeout_s
    while True:
        if all(store.read(key) is not None for key in keys):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)


class ColdBudget:
    """How long one worker may wait for renders it has none of: BUDGET_S a second."""

    def __init__(self, budget_s: float = COLD_BUDGET_S, clock=time.monotonic):
        self.budget_s = budget_s
        self.clock = clock
        self.second = -1
        self.spent_s = 0.0

    def left(self) -> float:
        second = int(self.clock())
        if second != self.second:
            self.second, self.spent_s = second, 0.0
        return max(0.0, self.budget_s - self.spent_s)

    def spend(self, seconds: float) -> None:
        self.spent_s += seconds


class ByteBudget(TokenBucket):
    """Bytes of rendered answers one worker may send a second (or renders it may make itself)."""

    def __init__(self, rate: float = BYTES_PER_S, burst: float = BYTES_PER_S, clock=time.monotonic):
        super().__init__(rate, burst, clock)


class PublicCache:
    """The workers' side: answer cacheable anonymous requests from the renderer's files."""

    def __init__(
        self, store: Store, engine, requests_seen, max_age_s: float = DEFAULT_MAX_AGE_S, public_url=""
    ):
        self.store = store
        self.engine = engine
        self.requests_seen = requests_seen
        self.max_age_s = max_age_s
        self.public_url = public_url
        self.budget = ColdBudget()
        self.bytes = ByteBudget()
        self.inline = ByteBudget(INLINE_PER_S, INLINE_BURST)  # a token bucket of renders

    def answer(self, environ, start_response) -> list | None:
        """Answer ENVIRON from a rendered file, or None: the app answers it."""
        method = environ.get("REQUEST_METHOD")
        if method not in ("GET", "HEAD") or environ.get(RENDERING_ENV):
            return None
        found = cache_key(environ, self.engine, self.public_url)
        if found is None:
            return None
        key, template = found
        started = time.perf_counter()
        if len(key) > MAX_KEY_CHARS:
            entry = _refusal("414 URI Too Long", "query too long for a statistics request")
        else:
            cached = self.lookup(key, inline_allowed=template == STATS_TEMPLATE)
            if cached is INLINE:
                return None  # the app answers it, counted by its own middleware
            entry = (
                cached
                or self._stand_in(key)
                or _refusal("503 Service Unavailable", "being prepared, retry in a second", retry_after=True)
            )
            if method == "GET" and not self.bytes.take(len(entry.body)):
                entry = _refusal(
                    "429 Too Many Requests", "too many requests for aggregates, retry in a second", True
                )
        start_response(entry.status, entry.headers)
        self.requests_seen.observe(template, method, int(entry.status[:3]), time.perf_counter() - started)
        return [b"" if method == "HEAD" else entry.body]

    def _stand_in(self, key: str) -> Entry | None:
        """For projects.json asked with a Host not rendered yet: the document rendered for no
        Host (relative links, warm from the start) rather than a 503 (a forged Host gets no
        more); None for anything else."""
        fallback = projects_key(None, "")
        if not key.startswith("/projects.json\n") or key == fallback:
            return None
        return self.store.read(fallback)

    def lookup(self, key: str, inline_allowed: bool = False) -> Entry | None:
        """KEY's answer: fresh; else a render is asked for and waited for a moment (FRESH_WAIT_S,
        or COLD_WAIT_S with nothing to show), within the worker's budget; else what there is
        (a file older than STALE_S still beats a 503); None with nothing. With nothing to show
        and INLINE_ALLOWED (a route whose cost does not grow with the number of projects), INLINE
        while the worker's allowance lasts: it answers this one itself."""
        entry = self.store.read(key)
        if entry is not None:
            age = time.monotonic() - entry.rendered_at
            if age <= self.max_age_s:
                return entry
        asked = self.store.ask(key)
        usable = entry is not None and age <= STALE_S
        if not usable and inline_allowed and self.inline.take(1):
            return INLINE
        if not asked:
            return entry
        wait_s = min(FRESH_WAIT_S if usable else COLD_WAIT_S, self.budget.left())
        started = time.monotonic()
        deadline = started + wait_s
        try:
            while time.monotonic() < deadline:
                time.sleep(COLD_POLL_S)
                fresh = self.store.read(key)
                if fresh is not None and (entry is None or fresh.identity != entry.identity):
                    return fresh
        finally:
            self.budget.spend(time.monotonic() - started)
        return entry


INLINE = Entry("", [], b"", 0.0, ())  # lookup's answer: the worker answers this one itself


def _refusal(status: str, reason: str, retry_after: bool = False) -> Entry:
    body = (reason + "\n").encode()
    headers = [
        ("content-type", "text/plain; charset=utf-8"),
        ("x-content-type-options", "nosniff"),
        ("content-length", str(len(body))),
        ("cache-control", "no-store"),
    ]
    if retry_after:
        headers.append(("retry-after", "1"))
    return Entry(status, headers, body, 0.0, ())
