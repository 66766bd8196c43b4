"""What the web app is configured with, in one object handed from the CLI to every worker.

Settings travel from ``tracker serve``/``tracker run`` (options, or their ``TRACKER_...``
environment variables read by click) to ``create_app`` in this object, never through
``os.environ``: a worker forked by the server gets the parent's copy, and a test builds one directly.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tracker_core.warriors import hq

# Below this share of maxmemory backfeed is still taken; above it backfeed answers 503 whatever
# the project's own bounds, so anonymous posts cannot fill Redis for every project.
DEFAULT_MEMORY_GUARD_PERCENT = 90


@dataclass(frozen=True)
class AppConfig:
    # How many proxies in front append to X-Forwarded-For (True: one; False or 0: the socket's
    # peer is the client); see client_ip.py.
    trust_forwarded: bool | int = False
    # Where the leaderboard's live feed is: ws://HOST:PORT, /PATH or :PORT; empty: the next port up.
    live_url: str = ""
    # Bearer token that shows /metrics for every project; empty: only listed projects are shown.
    metrics_token: str = ""
    # Offloaded segments and the archived done log (tracker run: DATA_DIR/segments).
    segments_dir: Path | None = None
    # Backfeed answers 503 above this share of Redis maxmemory.
    memory_guard_percent: int = DEFAULT_MEMORY_GUARD_PERCENT
    # The warrior registry's bounds (anyone can register): warriors held, registrations per
    # address (an IPv6 /64) an hour. Past either, nothing is stored (tracker_core.warriors.hq).
    warriors_max: int = hq.MAX_WARRIORS
    registrations_per_hour: int = hq.REGISTRATIONS_PER_HOUR
    # The tracker's public base URL (https://tracker.example.org, checked by public_url.validate):
    # projects.json's links are built from it, never from the Host header; empty: see public_url.py.
    public_url: str = ""
    # Where the renderer's files of anonymous aggregates are (tracker serve makes it before the
    # fork; None: every route answers inline), and how old such an answer may be served.
    public_cache_dir: str | None = None
    public_cache_max_age_s: float = 1.0
