"""claim and done as ready RESP bytes for the request hot path (issue 16), built from their
bindings' declarations.

hiredis.pack_command formats every argument afresh (about 1,300 instructions each: a sprintf and
an allocation), and a claim sends 31 of them, a done 26 or more: a third of what the worker's
Python does for a request. Most of them are the project's key names, the same on every call
within a minute. So a binding's ProjectKey and ClockKey slots are packed once per project and
minute, the caller's keys (its own queue) once per caller, and a call packs only its ARGV; with
CACHE_ARGS (claim) even those are kept packed per caller, so only the time is formatted per call.

The bytes are those Binding.__call__ would send (tests/core/scripts/test_packed_claim_done.py checks it over
random arguments); only RawRedis takes packed commands, so PACKED is False on other
connections and every call goes through the binding.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import itemgetter

import hiredis

from tracker_core.scripts.binding import MINUTE_MS, Binding, CallerKey, Given
from tracker_core.scripts.requests import claim, done
from tracker_core.scripts.sending import NOT_LOADED, run_packed

MAX_CACHED = 4096  # packed per-caller parts kept per PackedCall (started over past it)


def packed(args) -> bytes:
    """ARGS as RESP bulk strings, without the array header (a piece of a command)."""
    command = hiredis.pack_command(args if type(args) is tuple else tuple(args))
    return command[command.index(b"\n") + 1 :]


def _time(now_ms: int) -> bytes:
    text = str(now_ms)
    return f"${len(text)}\r\n{text}\r\n".encode()


class PackedCall:
    """BINDING's EVALSHA packed from per-project templates (see the module's docstring).

    ``run(conn, k, **keywords)`` takes the binding's keywords, or all of them by position in
    binding.params' order, as the engine passes them (the quicker: no dict is made). The
    binding's shape: one key of the caller (CallerKey or Given: its own queue), no run of
    extra KEYS, and ``now_ms`` first in its keywords and in ARGV."""

    def __init__(self, binding: Binding, packed: bool = True, *, cache_args: bool = False):
        callers = [i for i, slot in enumerate(binding.key_slots) if isinstance(slot, (CallerKey, Given))]
        if (
            len(callers) != 1
            or binding.more_keys is not None
            or binding.arg_slots[0].name != "now_ms"
            or binding.params[0] != "now_ms"
        ):
            raise ValueError(f"{binding.name}: no packed form for this shape")
        if cache_args and binding.more_args is not None:
            raise ValueError(f"{binding.name}: a run of ARGV is not kept packed")
        self.binding = binding
        self.packed = packed  # False: always through the binding (not a RawRedis connection)
        self.cache_args = cache_args
        self._own = callers[0]
        # A cached entry is looked up by the keyspace and the positional arguments it depends
        # on: the own key's, or with CACHE_ARGS all but the time.
        self._entry_of: Callable[[tuple], object]
        if cache_args:
            self._entry_of = itemgetter(slice(1, None))
        else:
            at = [binding.params.index(name) for name in binding.key_slots[self._own].uses]
            self._entry_of = itemgetter(*at) if len(at) > 1 else itemgetter(slice(at[0], at[0] + 1))
        self._templates: dict[str, tuple] = {}
        self._entries: dict[tuple, tuple] = {}

    def run(self, conn, k, *positional, **keywords):
        """The script's reply: packed when it can be, through the binding otherwise (Redis has
        not loaded the script: the binding sends its source)."""
        binding = self.binding
        if keywords or len(positional) != len(binding.params):
            keywords.update(zip(binding.params, positional))
            call = binding.call(keywords)
            positional = tuple(call[name] for name in binding.params)
        if self.packed:
            raw = run_packed(conn, binding.name, self.payload(k, positional))
            if raw is not NOT_LOADED:
                return binding.reply(raw)
        return binding(conn, k, **dict(zip(binding.params, positional)))

    def payload(self, k, positional: tuple) -> bytes:
        """The packed command for the binding's keywords POSITIONAL (all of them, in order)."""
        now_ms = positional[0]
        minute = now_ms // MINUTE_MS
        settings_key = k.settings  # names the keyspace: a project, or one shard of it
        template = self._templates.get(settings_key)
        if template is None or template[0] != minute:
            if len(self._templates) >= MAX_CACHED:
                self._templates.clear()
            template = self._templates[settings_key] = self._template(k, minute)
        _minute, head, tail, fixed = template
        key = (settings_key, self._entry_of(positional))
        entry = self._entries.get(key)
        if entry is None:
            entry = self._entry(k, positional, key)
        if self.cache_args:
            return b"".join((head, entry[0], tail, _time(now_ms), entry[1]))
        argv = self.binding._argv(k, *positional)
        return b"".join((b"*%d\r\n" % (fixed + len(argv)), head, entry[0], tail, packed(argv)))

    def _template(self, k, minute: int) -> tuple:
        """(MINUTE, HEAD: the command up to the caller's own key, TAIL: the keys after it,
        FIXED: the arguments before ARGV) for K's keyspace in that minute."""
        binding = self.binding
        at_minute = {"now_ms": minute * MINUTE_MS}  # all a ProjectKey or ClockKey reads
        keys = [slot.value(k, at_minute) for slot in binding.key_slots[: self._own]]
        after = [slot.value(k, at_minute) for slot in binding.key_slots[self._own + 1 :]]
        fixed = 3 + len(binding.key_slots)
        head = packed(("EVALSHA", binding.script.sha, len(binding.key_slots), *keys))
        if self.cache_args:  # every call has as many arguments: the array's header goes first
            head = b"*%d\r\n" % (fixed + len(binding.arg_slots)) + head
        return minute, head, packed(after), fixed

    def _entry(self, k, positional: tuple, key: tuple) -> tuple:
        """(the caller's own key packed, with CACHE_ARGS its ARGV but the time packed)."""
        if len(self._entries) >= MAX_CACHED:
            self._entries.clear()
        call = dict(zip(self.binding.params, positional))
        own = packed((self.binding.key_slots[self._own].value(k, call),))
        rest = packed(slot.value(k, call) for slot in self.binding.arg_slots[1:]) if self.cache_args else b""
        entry = self._entries[key] = (own, rest)
        return entry


def packed_claim(packed: bool = True) -> PackedCall:
    return PackedCall(claim, packed, cache_args=True)


def packed_done(packed: bool = True) -> PackedCall:
    return PackedCall(done, packed)
