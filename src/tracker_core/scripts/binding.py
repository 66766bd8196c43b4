"""How a Lua script's call is declared, and the one way such a declaration is sent.

A Binding names its script (``lua/NAME-NKEYS.lua``) and lists, in the script's order:
- its KEYS: a ProjectKeys attribute by name (``"settings"``), a key of the clock
  (ClockKey: this minute's counters, today's uniques), or a key picked from the caller's
  keywords (CallerKey; ``given("queue", ...)`` for a key the caller passes as it is), and at
  most one run of further keys (Many);
- its ARGV: ``name=label`` for a caller keyword sent as it is, Flag for one sent as '1' or '0',
  Derived for a value computed from the keywords or the keys, and at most one run of further
  values;
- its reply: SHAPE (a NamedTuple) and the function REPLY that makes it from the raw reply,
  or the number itself; and its CODES (an IntEnum of the numbers the script returns).

A computed slot's function names the keywords it reads by its parameters (``lambda k, owners:
...``, with ``k`` first for the project's keys). The binding's keywords are all those read, in
the order ARGV and then KEYS first read them (Binding.params); callers pass them by name (only
tracker_core.scripts.packed takes them by position, in that order).

Each KEYS and ARGV slot carries the words the script's contract header starts that slot with
(a ProjectKeys attribute: its key's name after the project's tag): tests/lua/test_contract.py
reads the headers and checks count, order and names against these declarations, so a reordered
argument fails there and not in production.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from enum import IntEnum
from typing import Any, Generic, TypeVar

from tracker_core.scripts.loading import SCRIPTS
from tracker_core.scripts.sending import run

MINUTE_MS = 60_000
MINUTES_A_DAY = 1440


def wire(name):
    """NAME as the bytes Redis holds: a name queued before names had to be UTF-8 reads back
    with surrogateescape, and the client's packer refuses lone surrogates (one such name would
    stop every admin verb over its queue)."""
    return name.encode("utf-8", "surrogateescape") if isinstance(name, str) else name


def pairs(items: Sequence, held: Sequence) -> list:
    """ITEMS and their held entries ("LIMIT\\0NAME" or '') interleaved, as the bytes Redis holds
    (a Many of the keywords ITEMS and HELD)."""
    return [wire(x) for pair in zip(items, held, strict=True) for x in pair]


def _reads(function: Callable) -> tuple[bool, tuple[str, ...]]:
    """(whether FUNCTION takes the project's keys first, as ``k``; the caller keywords it
    reads, by the names of its other parameters)."""
    names = tuple(inspect.signature(function).parameters)
    return (True, names[1:]) if names[:1] == ("k",) else (False, names)


class _Computed:
    """A slot whose value FUNCTION computes from the keywords it names (and K if it asks)."""

    __slots__ = ("label", "function", "takes_k", "uses", "name")

    def __init__(self, label: str, function: Callable):
        self.label, self.function, self.name = label, function, ""
        self.takes_k, self.uses = _reads(function)

    def value(self, k, call: dict):
        return self.function(*((k,) if self.takes_k else ()), *(call[u] for u in self.uses))

    def source(self, scope: dict, at: str) -> str:
        scope[at] = self.function
        return f"{at}({', '.join((('k',) if self.takes_k else ()) + self.uses)})"


class ProjectKey:
    """A key that is an attribute of the project's ProjectKeys; LABEL when the header calls it
    otherwise than by its name after the tag."""

    __slots__ = ("attr", "label", "uses")

    def __init__(self, attr: str, label: str | None = None):
        self.attr, self.label, self.uses = attr, label, ()

    def value(self, k, call: dict):
        return getattr(k, self.attr)

    def source(self, scope: dict, at: str) -> str:
        return f"k.{self.attr}"


class ClockKey:
    """A key of the project that changes with the minute of the call's now_ms,
    OF_MINUTE(k, minute): the packed calls keep it packed for that minute."""

    __slots__ = ("label", "of_minute", "uses")

    def __init__(self, label: str, of_minute: Callable):
        self.label, self.of_minute, self.uses = label, of_minute, ("now_ms",)

    def value(self, k, call: dict):
        return self.of_minute(k, call["now_ms"] // MINUTE_MS)

    def source(self, scope: dict, at: str) -> str:
        scope[at] = self.of_minute
        return f"{at}(k, now_ms // {MINUTE_MS})"


class CallerKey(_Computed):
    """A key picked by the caller's keywords: FUNCTION([k,] keyword...) names it."""


def global_key(label: str, name: str) -> CallerKey:
    """The global key NAME (outside any project: the warrior registry's, the webhooks'), which
    the script's header calls LABEL."""
    return CallerKey(label, lambda: name)


class Given:
    """A key the caller passes as it is, as keyword NAME (a queue it chose, as ProjectKeys
    named it)."""

    __slots__ = ("name", "label", "uses")

    def __init__(self, name: str, label: str):
        self.name, self.label, self.uses = name, label, (name,)

    def value(self, k, call: dict):
        return call[self.name]

    def source(self, scope: dict, at: str) -> str:
        return self.name


def given(name: str, label: str) -> Given:
    return Given(name, label)


class Arg(Given):
    """ARGV slot sent as the caller's keyword NAME, as it is."""


class Flag:
    """ARGV slot sent as '1' or '0' for the truth of the caller's keyword of its name."""

    __slots__ = ("name", "label", "uses")

    def __init__(self, label: str):
        self.name, self.label = "", label
        self.uses: tuple[str, ...] = ()  # the keyword of its name, once Binding knows it

    def value(self, k, call: dict):
        return "1" if call[self.name] else "0"

    def source(self, scope: dict, at: str) -> str:
        return f"('1' if {self.name} else '0')"


class Derived(_Computed):
    """ARGV slot computed by FUNCTION([k,] keyword...) from the caller's keywords."""


class Many(_Computed):
    """The run of KEYS or ARGV after the declared ones, FUNCTION([k,] keyword...) -> iterable;
    LABEL is how the header names the run (at its ``KEYS[n ..]``/``ARGV[n...]``, or in its
    prose)."""

    def source(self, scope: dict, at: str) -> str:
        return "*" + super().source(scope, at)


def raw_reply(raw: Any) -> Any:
    """The reply of a script that answers a number (or a list the caller reads itself)."""
    return raw


CodesT = TypeVar("CodesT", bound=IntEnum)
ReplyT = TypeVar("ReplyT")


def _compiled(slots: Sequence, more: Many | None, params: tuple[str, ...]) -> Callable:
    """A function (k, *PARAMS) -> the tuple SLOTS (then MORE's run) build, compiled once from the
    declaration into one tuple display, as namedtuple compiles its class: a loop calling each
    slot costs the request hot path (claim, done) about twice as much, and positional
    arguments spare it a dict."""
    scope: dict = {}
    items = [slot.source(scope, f"slot_{i}") for i, slot in enumerate((*slots, *([more] if more else [])))]
    # A tuple: hiredis packs nothing else (a list would be copied into one on every call).
    display = "".join(f"{item}, " for item in items)
    exec(f"def build(k, {', '.join(params)}):\n    return ({display})\n", scope)  # noqa: S102
    return scope["build"]


class Binding(Generic[CodesT, ReplyT]):
    """One Lua script's call (see the module's docstring). ``binding(conn, k, **keywords)``
    runs it; ``keys``/``argv`` build what it sends; ``codes`` and ``Reply`` describe replies.
    Typed by its codes and by what REPLY makes of the raw reply (raw_reply: the reply itself)."""

    def __init__(
        self,
        name: str,
        *,
        keys: Sequence,
        args: dict | None = None,
        more_keys: Many | None = None,
        more_args: Many | None = None,
        reply: Callable[[Any], ReplyT],
        shape: type[ReplyT] | None = None,
        codes: type[CodesT],
        defaults: dict | None = None,
    ) -> None:
        self.name = name
        self.key_slots = tuple(ProjectKey(spec) if isinstance(spec, str) else spec for spec in keys)
        self.arg_slots = tuple(
            Arg(arg, spec) if isinstance(spec, str) else spec for arg, spec in (args or {}).items()
        )
        for arg, slot in zip(args or {}, self.arg_slots, strict=True):
            if isinstance(slot, Flag):
                slot.name, slot.uses = arg, (arg,)
            elif isinstance(slot, Derived):
                slot.name = arg
        self.more_keys, self.more_args = more_keys, more_args
        self.reply, self.codes = reply, codes
        self.Reply = shape  # the NamedTuple REPLY makes, None for a number
        self.defaults = defaults or {}
        # The caller's keywords, in the order ARGV then KEYS first read them (a packed call's
        # positional arguments follow it).
        order: dict[str, None] = {}
        for slot in (*self.arg_slots, *self.key_slots, more_args, more_keys):
            if slot is not None:
                order.update(dict.fromkeys(slot.uses))
        self.params = tuple(order)
        self._params = frozenset(order)
        if not all(p.isidentifier() and p != "k" and not p.startswith("slot_") for p in order):
            raise ValueError(f"{name}: keywords {order} clash with the compiled builders' names")
        # _keys(k, *params) and _argv(k, *params) (or by keyword): the tuples sent, as declared.
        self._keys = _compiled(self.key_slots, more_keys, self.params)
        self._argv = _compiled(self.arg_slots, more_args, self.params)

    @property
    def script(self):
        return SCRIPTS[self.name]

    def call(self, keywords: dict) -> dict:
        """KEYWORDS with the defaults; TypeError for a keyword missing or unknown."""
        call = {**self.defaults, **keywords} if self.defaults else keywords
        if call.keys() != self._params:
            wrong = sorted(call.keys() ^ self._params)
            raise TypeError(f"{self.name}: missing or unknown keywords {wrong}")
        return call

    def keys(self, k=None, /, **keywords) -> tuple:
        """The KEYS a call with KEYWORDS sends (only the keywords the keys use are needed)."""
        return self._keys(k, **{**dict.fromkeys(self.params), **self.defaults, **keywords})

    def argv(self, k=None, /, **keywords) -> tuple:
        """The ARGV a call with KEYWORDS sends."""
        return self._argv(k, **self.call(keywords))

    def __call__(self, conn, k=None, /, **keywords) -> ReplyT:
        """Run the script on CONN for K's project (none for the global scripts): its reply."""
        call = self.call(keywords)
        return self.reply(run(conn, self.name, self._keys(k, **call), self._argv(k, **call)))

    def send(self, conn, keys: Sequence, argv: Sequence):
        """The raw reply to KEYS and ARGV as given: for tests that send what no caller would."""
        return run(conn, self.name, keys, argv)

    def __repr__(self) -> str:
        return f"<binding of {self.name}>"


class RawBinding(Binding[CodesT, Any]):
    """A Binding whose script answers a number, or a list its caller reads itself: the reply is
    the raw reply (raw_reply), typed Any; the rest is declared as for any Binding."""

    def __init__(self, name: str, *, codes: type[CodesT], **declaration: Any) -> None:
        super().__init__(name, reply=raw_reply, codes=codes, **declaration)
