"""The claim and done script calls as ready RESP bytes, for the request hot path (issue 16).

hiredis.pack_command formats every argument afresh (about 1,300 instructions each: a sprintf and
an allocation), and a claim sends 31 of them, a done 26 or more: a third of what the worker's
Python does for a request. Most of them are the project's key names, the same on every call
within a minute (the minute's counters and the day's uniques are keys too). So each project's
keys are packed once a minute, around the one key that changes with the caller (its own queue),
and a call packs only that key and its ARGV: for a claim, even those are kept packed per
(downloader, IP, wanted, uniques flags), so only the time is formatted per call.

tracker_core.script_calls stays the one place that knows each script's KEYS and ARGV: a
template is cut out of the very command script_calls builds (recorded, not sent) and used only
once two sample calls, packed from it, match script_calls' own commands byte for byte. A command
of another shape (the downloader's queue not among the keys, a reordered ARGV) makes no
template, and the engine calls script_calls as before. Only a RawRedis connection takes packed
commands; the other topologies always go through script_calls.
"""

from __future__ import annotations

import hiredis

from tracker_core import blocks, script_calls, scripts
from tracker_core.keys import ProjectKeys

MINUTE_MS = script_calls.MINUTE_MS
MAX_CACHED = 4096  # packed per-caller parts kept per engine (started over past it)
# Two sample calls whose every argument differs, at both ends of the minute.
_CLAIM_SAMPLES = (
    (0, "probe-one", "192.0.2.1", 7, "1000", True, False),
    (MINUTE_MS - 1, "probe-two", "2001:db8::2", 3, "", False, True),
)
_DONE_SAMPLES = (
    (0, "probe-one", "v1", '{"a": 1}', "192.0.2.1", ["one.example", 5], ["x", "y"]),
    (MINUTE_MS - 1, "probe-two", "", "null", "", [], ["z"]),
)


def packed(args) -> bytes:
    """ARGS as RESP bulk strings, without the array header (a piece of a command)."""
    command = hiredis.pack_command(tuple(args))
    return command[command.index(b"\n") + 1 :]


def _time(now_ms: int) -> bytes:
    text = str(now_ms)
    return f"${len(text)}\r\n{text}\r\n".encode()


class _Recorder:
    """A connection that keeps the command given to it and answers REPLY (nothing is sent)."""

    def __init__(self, reply):
        self.reply = reply
        self.command = None

    def execute_command(self, *args):
        self.command = args
        return self.reply


class _Template:
    """A project's command for one minute: HEAD (EVALSHA, its SHA, the key count and the keys
    before the caller's queue), TAIL (the keys after it); FIXED: how many arguments come before
    ARGV. HEAD None: the command had another shape, call script_calls."""

    __slots__ = ("minute", "head", "tail", "fixed")

    def __init__(self, minute: int, head: bytes | None = None, tail: bytes | None = None, fixed: int = 0):
        self.minute = minute
        self.head = head
        self.tail = tail
        self.fixed = fixed


def _cut(command: tuple, own_queue: str, minute: int) -> _Template | None:
    """COMMAND (EVALSHA SHA N KEYS... ARGV...) cut around OWN_QUEUE, the one key of the caller."""
    if len(command) < 3 or command[0] != "EVALSHA" or type(command[2]) is not int:
        return None
    fixed = 3 + command[2]
    keys = command[3:fixed]
    if keys.count(own_queue) != 1:
        return None
    at = 3 + keys.index(own_queue)
    return _Template(minute, packed(command[:at]), packed(command[at + 1 : fixed]), fixed)


class _Commands:
    """One script's EVALSHA packed from per-project templates (see the module's docstring).
    A subclass names the script (NAME, REPLY) and says how script_calls is called (call), how
    a call is packed from a template (_payload) and gives two SAMPLES of arguments, the first
    (after the time offset) being the downloader."""

    NAME = ""
    SAMPLES: tuple = ()

    def __init__(self, packed: bool = True):
        self.packed = packed  # False: always through script_calls (not a RawRedis connection)
        self._templates: dict[str, _Template] = {}

    @staticmethod
    def call(conn, k: ProjectKeys, *args):
        """script_calls' function for the script, with ARGS in this class's order."""
        raise NotImplementedError

    @staticmethod
    def reply(raw):
        """The script's raw reply as script_calls returns it."""
        raise NotImplementedError

    def _payload(self, template: _Template, k: ProjectKeys, *args) -> bytes:
        raise NotImplementedError

    def _finish(self, template: _Template, command: tuple) -> None:
        """Complete a template cut from COMMAND (the claim's array header is fixed)."""

    def run(self, conn, k: ProjectKeys, *args):
        """The script's reply to ARGS: packed when it can be, through script_calls otherwise
        (another shape, or Redis has not loaded the script: script_calls loads it)."""
        if self.packed:
            payload = self.payload(k, *args)
            if payload is not None:
                raw = scripts.run_packed(conn, self.NAME, payload)
                if raw is not scripts.NOT_LOADED:
                    return self.reply(raw)
        return self.call(conn, k, *args)

    def payload(self, k: ProjectKeys, now_ms: int, *args) -> bytes | None:
        """The packed command for script_calls with these arguments, or None: call it."""
        minute = now_ms // MINUTE_MS
        template = self._templates.get(k.project)
        if template is None or template.minute != minute:
            if len(self._templates) >= MAX_CACHED:
                self._templates.clear()
            template = self._templates[k.project] = self._template(k, minute)
        if template.head is None:  # the command had another shape this minute
            return None
        return self._payload(template, k, now_ms, *args)

    def _recorded(self, k: ProjectKeys, *args) -> tuple:
        recorder = _Recorder([0, "0"])
        self.call(recorder, k, *args)
        return recorder.command

    def _template(self, k: ProjectKeys, minute: int) -> _Template:
        base = minute * MINUTE_MS
        offset, *first = self.SAMPLES[0]
        command = self._recorded(k, base + offset, *first)
        template = _cut(command, k.downloader_queue(first[0]), minute)
        if template is None:
            return _Template(minute)
        self._finish(template, command)
        for offset, *sample in self.SAMPLES:
            expected = hiredis.pack_command(self._recorded(k, base + offset, *sample))
            if self._payload(template, k, base + offset, *sample) != expected:
                return _Template(minute)
        return template


class ClaimCommands(_Commands):
    """claim-21.lua: arguments (now_ms, downloader, ip, wanted, counted_under, downloader
    counted, ip counted); the other arguments kept packed per caller."""

    NAME = "claim"
    SAMPLES = _CLAIM_SAMPLES
    reply = staticmethod(script_calls.claim_reply)

    def __init__(self, packed: bool = True):
        super().__init__(packed)
        self._parts: dict[tuple, tuple[bytes, bytes]] = {}

    @staticmethod
    def call(conn, k, now_ms, downloader, ip, wanted, counted_under, d_counted, ip_counted):
        return script_calls.claim(
            conn,
            k,
            now_ms=now_ms,
            downloader=downloader,
            ip=ip,
            wanted=wanted,
            ip_key=blocks.ip_key(ip),
            counted_under=counted_under,
            downloader_counted=d_counted,
            ip_counted=ip_counted,
        )

    def _finish(self, template, command):
        # Every claim has as many arguments: the array's header goes with the keys.
        template.head = b"*%d\r\n" % len(command) + template.head

    def _payload(self, template, k, now_ms, downloader, ip, wanted, counted_under, d_counted, ip_counted):
        key = (k.project, downloader, ip, wanted, counted_under, d_counted, ip_counted)
        parts = self._parts.get(key)
        if parts is None:
            if len(self._parts) >= MAX_CACHED:
                self._parts.clear()
            rest = (
                downloader,
                ip,
                wanted,
                blocks.ip_key(ip),
                counted_under,
                "1" if d_counted else "0",
                "1" if ip_counted else "0",
            )
            parts = self._parts[key] = (packed((k.downloader_queue(downloader),)), packed(rest))
        return b"".join((template.head, parts[0], template.tail, _time(now_ms), parts[1]))


class DoneCommands(_Commands):
    """done-20.lua: arguments (now_ms, downloader, version, item_id, ip, domain_bytes, items)."""

    NAME = "done"
    SAMPLES = _DONE_SAMPLES
    reply = staticmethod(script_calls.done_reply)

    def __init__(self, packed: bool = True):
        super().__init__(packed)
        self._own: dict[tuple, bytes] = {}

    @staticmethod
    def call(conn, k, now_ms, downloader, version, item_id, ip, domain_bytes, items):
        return script_calls.done(
            conn,
            k,
            now_ms=now_ms,
            downloader=downloader,
            version=version,
            item_id=item_id,
            ip=ip,
            domain_bytes=domain_bytes,
            items=items,
        )

    def _payload(self, template, k, now_ms, downloader, version, item_id, ip, domain_bytes, items):
        key = (k.project, downloader)
        own = self._own.get(key)
        if own is None:
            if len(self._own) >= MAX_CACHED:
                self._own.clear()
            own = self._own[key] = packed((k.downloader_queue(downloader),))
        argv = (now_ms, downloader, version, item_id, ip, len(domain_bytes) // 2, *domain_bytes, *items)
        return b"".join(
            (b"*%d\r\n" % (template.fixed + len(argv)), template.head, own, template.tail, packed(argv))
        )
