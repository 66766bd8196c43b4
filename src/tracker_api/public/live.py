"""The live leaderboard feed: `tracker live`, an asyncio websocket server.

A viewer connects to ``ws://HOST:PORT/PROJECT``. Per project with viewers one watcher follows
the project's log stream (XREAD BLOCK: woken by each completed item, nothing lost between
reads) and listens to the settings channel (pub/sub), and broadcasts at most one log batch and
one snapshot per ``interval_s``: thousands of viewers cost one Redis reader and one encoded
message per update, whatever the done rate. A new viewer gets the recent log lines first, then
the latest snapshot. The page falls back to polling stats.json while this process is down.

Redis I/O is blocking (the hot path's own clients, so every topology works) and runs in worker
threads, one connection per watcher; the event loop only moves messages. The feed has its own
thread pool with one thread per watched project (asyncio's default pool has about six on a
small machine, and every watcher blocks in XREAD for up to a second, so a seventh project would
wait behind the others). One XREAD over all streams would need fewer threads, but in a Redis
Cluster each project's stream lives in its own slot, so one reader per project is what works in
every topology. A sharded project's watcher reads each shard's log in turn (one XREAD per
shard: its own slot) and sends their lines merged by time. Past MAX_WATCHED_PROJECTS a new project's viewers are closed with 1013 (try
again later) and its page polls stats.json instead.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import orjson
from websockets.asyncio.server import broadcast, serve

from tracker_api.public.stats_json import stats_body
from tracker_api.web import logs
from tracker_core import keyspace
from tracker_core.figures.stats import StatsReader, log_line
from tracker_core.figures.stats_shards import newest_lines
from tracker_core.infra import topology
from tracker_core.items.engine import Engine

log = logging.getLogger("tracker.live")

DEFAULT_INTERVAL_S = 0.5  # at most two updates a second per project
SNAPSHOT_IDLE_S = 5.0  # claims change "out" without a log line: refresh now and then
RECENT_LINES = 50  # what a new viewer gets first
BLOCK_MS = 1000
UNKNOWN_PROJECT_CLOSE = 4404
TRY_AGAIN_LATER_CLOSE = 1013
MAX_WATCHED_PROJECTS = 256


def _text(message: dict) -> str:
    # Text frames: browsers hand binary frames to JavaScript as Blobs.
    return orjson.dumps(message).decode()


class ProjectWatcher:
    """Follow one project's log and statistics for its viewers."""

    def __init__(self, feed: LiveFeed, project: str):
        self.feed = feed
        self.project = project
        self.viewers: set = set()
        self.recent: collections.deque = collections.deque(maxlen=RECENT_LINES)  # oldest first
        self.snapshot_text: str | None = None
        self.ready = asyncio.Event()
        self.exists = True
        self.failed = False
        self.dirty = False
        self.engine = Engine(feed.redis_url)
        self.reader = StatsReader(self.engine.conn, self.engine.layout)
        self.log_keys: list[str] = [keyspace.ProjectKeys(project).log]  # one per shard, in order
        self.last_ids = ["0-0"]
        self.turn = 0  # the shard whose log a sharded project's idle read blocks on next
        self.snapshot_at = 0.0

    # -- blocking parts, run in a worker thread ----------------------------------------------------

    def _start(self) -> None:
        if self.engine.settings(self.project) is None:
            self.exists = False
            return
        keys = self.engine.layout(self.project).keys
        shards = [[log_line(i, flat) for i, flat in self.reader.log_entries(k, RECENT_LINES)] for k in keys]
        self.log_keys = [k.log for k in keys]
        self.last_ids = [lines[0]["id"] if lines else "0-0" for lines in shards]
        lines = shards[0] if len(shards) == 1 else newest_lines(shards, RECENT_LINES)
        self.recent.extend(reversed(lines))
        self._snapshot()

    def _snapshot(self) -> None:
        self.snapshot_text = _text(
            {"type": "snapshot", "data": stats_body(self.engine, self.reader, self.project)}
        )
        self.snapshot_at = time.monotonic()

    def _read(self, index: int, block_ms: int | None) -> list[dict]:
        """The new lines of shard INDEX's log; BLOCK_MS: wait that long for one (None: no wait)."""
        block = () if block_ms is None else ("BLOCK", block_ms)
        reply = self.engine.conn.execute_command(
            "XREAD", "COUNT", 1000, *block, "STREAMS", self.log_keys[index], self.last_ids[index]
        )
        lines = []
        for _, entries in reply or ():
            for entry_id, flat in entries:
                lines.append(log_line(entry_id, flat))
        if lines:
            self.last_ids[index] = lines[-1]["id"]
        return lines

    def _read_shards(self, block_ms: int) -> list[dict]:
        """New lines of every shard's log, oldest first by the done's time. One XREAD over
        several streams cannot span a Cluster's slots: each shard is read on its own, without
        waiting; when none has any, the read waits on one shard (in turn) for a share of
        BLOCK_MS, then reads the others again."""
        count = len(self.log_keys)
        lines = [line for index in range(count) for line in self._read(index, None)]
        if not lines:
            self.turn = (self.turn + 1) % count
            lines = self._read(self.turn, max(1, block_ms // count))
            if lines:
                lines += [
                    line for index in range(count) if index != self.turn for line in self._read(index, None)
                ]
        return sorted(lines, key=lambda line: (line["at"], line["id"]))

    def _follow_new_shards(self) -> None:
        """Follow the logs of shards added since (tracker project grow), from their start."""
        for k in self.engine.layout(self.project).keys[len(self.log_keys) :]:
            self.log_keys.append(k.log)
            self.last_ids.append("0-0")

    def _step(self, block_ms: int) -> tuple[list[dict], bool]:
        lines = self._read(0, block_ms) if len(self.log_keys) == 1 else self._read_shards(block_ms)
        refresh = bool(lines) or self.dirty or time.monotonic() - self.snapshot_at > SNAPSHOT_IDLE_S
        if refresh:
            if self.dirty:  # settings changed (title...): read them afresh
                self.engine._settings.pop(self.project, None)
                self._follow_new_shards()
            self.dirty = False
            self._snapshot()
        return lines, refresh

    # -- the event loop's part -------------------------------------------------------------------

    async def run(self) -> None:
        try:
            try:
                await asyncio.to_thread(self._start)
            except Exception as exc:  # Redis away: viewers are closed and fall back to polling
                log.warning("%s: %s", self.project, exc)
                self.failed = True
                return
            self.ready.set()
            if not self.exists:
                return
            while self.viewers:
                started = time.monotonic()
                try:
                    lines, refreshed = await asyncio.to_thread(self._step, BLOCK_MS)
                except Exception as exc:  # Redis away: keep the viewers, try again shortly
                    log.warning("%s: %s", self.project, exc)
                    await asyncio.sleep(1.0)
                    continue
                if lines:
                    self.recent.extend(lines)
                    broadcast(self.viewers, _text({"type": "log", "lines": lines[::-1]}))
                if refreshed and self.snapshot_text is not None:
                    broadcast(self.viewers, self.snapshot_text)
                await asyncio.sleep(max(0.0, self.feed.interval_s - (time.monotonic() - started)))
        finally:
            self.ready.set()
            self.feed.watchers.pop(self.project, None)
            self.engine.conn.close()


class LiveFeed:
    def __init__(self, redis_url: str, interval_s: float = DEFAULT_INTERVAL_S):
        self.redis_url = redis_url
        self.interval_s = interval_s
        self.watchers: dict[str, ProjectWatcher] = {}
        self.loop: asyncio.AbstractEventLoop | None = None

    async def handler(self, websocket) -> None:
        project = websocket.request.path.split("?")[0].strip("/").split("/")[-1]
        if not keyspace.valid_project_name(project):
            await websocket.close(UNKNOWN_PROJECT_CLOSE, "unknown project")
            return
        watcher = self.watchers.get(project)
        if watcher is None and len(self.watchers) >= MAX_WATCHED_PROJECTS:
            await websocket.close(TRY_AGAIN_LATER_CLOSE, "too many projects watched")
            return
        if watcher is None:
            watcher = self.watchers[project] = ProjectWatcher(self, project)
            watcher.viewers.add(websocket)
            asyncio.create_task(watcher.run())
        else:
            watcher.viewers.add(websocket)
        try:
            await watcher.ready.wait()
            if watcher.failed:
                await websocket.close(1011, "feed unavailable")
                return
            if not watcher.exists:
                await websocket.close(UNKNOWN_PROJECT_CLOSE, "unknown project")
                return
            await websocket.send(_text({"type": "log", "lines": list(watcher.recent)[::-1]}))
            if watcher.snapshot_text:
                await websocket.send(watcher.snapshot_text)
            await websocket.wait_closed()
        finally:
            watcher.viewers.discard(websocket)

    def _settings_changed(self, project: str) -> None:
        watcher = self.watchers.get(project)
        if watcher is not None:
            watcher.dirty = True

    def _listen_settings(self, loop: asyncio.AbstractEventLoop) -> None:
        """Pub/sub on the settings channel (a blocking loop in a daemon thread), heard on LOOP."""
        while True:
            try:
                pubsub = topology.admin_client(self.redis_url, decode_responses=True).pubsub()
                pubsub.subscribe(keyspace.SETTINGS_CHANNEL)
                for message in pubsub.listen():
                    if message.get("type") == "message":
                        project = str(message["data"]).split(" ")[0]
                        loop.call_soon_threadsafe(self._settings_changed, project)
            except Exception as exc:  # Redis restarting: resubscribe shortly
                log.warning("settings channel: %s", exc)
                time.sleep(1.0)

    async def serve(self, host: str, port: int, ready=None) -> None:
        logs.ensure_setup()
        self.loop = loop = asyncio.get_running_loop()
        # One thread per watched project (each blocks in XREAD), plus a few for their start-ups.
        self.loop.set_default_executor(
            ThreadPoolExecutor(max_workers=MAX_WATCHED_PROJECTS + 8, thread_name_prefix="live-redis")
        )
        stop = self.loop.create_future()

        def stop_once() -> None:
            if not stop.done():
                stop.set_result(None)

        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop_once)
        threading.Thread(target=self._listen_settings, args=(loop,), daemon=True).start()
        # Viewers send nothing: a small max_size turns any flood into a closed connection.
        async with serve(self.handler, host, port, max_size=4096, ping_interval=30) as server:
            bound = server.sockets[0].getsockname()[1]
            log.info("feed on ws://%s:%s/PROJECT, Redis %s", host, bound, self.redis_url)
            if ready is not None:
                ready(bound)
            await stop


def run(redis_url: str, host: str, port: int, interval_s: float = DEFAULT_INTERVAL_S) -> None:
    """Run the feed until SIGTERM or SIGINT."""
    asyncio.run(LiveFeed(redis_url, interval_s).serve(host, port))
