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

Each KEYS and ARGV slot carries the words the script's contract header starts that slot with
(a ProjectKeys attribute: its key's name after the project's tag): tests/lua/test_contract.py
reads the headers and checks count, order and names against these declarations, so a reordered
argument fails there and not in production. Callers pass keywords only, never positions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tracker_core.scripts.loading import SCRIPTS
from tracker_core.scripts.sending import run

MINUTE_MS = 60_000
MINUTES_A_DAY = 1440


def wire(name):
    """NAME as the bytes Redis holds: a name queued before names had to be UTF-8 reads back
    with surrogateescape, and the client's packer refuses lone surrogates (one such name would
    stop every admin verb over its queue)."""
    return name.encode("utf-8", "surrogateescape") if isinstance(name, str) else name


def pairs(names: Sequence, held: Sequence) -> list:
    """NAMES and their held entries ("LIMIT\\0NAME" or '') interleaved, as the bytes Redis holds."""
    return [wire(x) for pair in zip(names, held, strict=True) for x in pair]


class ProjectKey:
    """A key that is an attribute of the project's ProjectKeys; LABEL when the header calls it
    otherwise than by its name after the tag."""

    __slots__ = ("attr", "label", "uses")

    def __init__(self, attr: str, label: str | None = None):
        self.attr, self.label, self.uses = attr, label, ()

    def build(self, k, call):
        return getattr(k, self.attr)


class ClockKey:
    """A key of the project that changes with the minute of the call's now_ms (BUILD(k, minute));
    the packed calls keep it packed for that minute."""

    __slots__ = ("label", "of_minute", "uses")

    def __init__(self, label: str, of_minute: Callable):
        self.label, self.of_minute, self.uses = label, of_minute, ("now_ms",)

    def build(self, k, call):
        return self.of_minute(k, call["now_ms"] // MINUTE_MS)


class CallerKey:
    """A key picked by the caller's keywords USES (BUILD(k, call))."""

    __slots__ = ("label", "build", "uses")

    def __init__(self, label: str, build: Callable, *uses: str):
        self.label, self.build, self.uses = label, build, uses


def given(name: str, label: str) -> CallerKey:
    """The caller's keyword NAME is the key itself (a queue it chose, as ProjectKeys named it)."""
    return CallerKey(label, lambda k, call: call[name], name)


class Arg:
    """ARGV slot sent as the caller's keyword NAME, as it is."""

    __slots__ = ("name", "label", "uses")

    def __init__(self, name: str, label: str):
        self.name, self.label, self.uses = name, label, (name,)

    def build(self, k, call):
        return call[self.name]


class Flag:
    """ARGV slot sent as '1' or '0' for the truth of the caller's keyword of its name."""

    __slots__ = ("name", "label", "uses")

    def __init__(self, label: str):
        self.name, self.label, self.uses = "", label, ()

    def build(self, k, call):
        return "1" if call[self.name] else "0"


class Derived:
    """ARGV slot computed from the caller's keywords USES (and K): BUILD(k, call)."""

    __slots__ = ("name", "label", "build", "uses")

    def __init__(self, label: str, build: Callable, *uses: str):
        self.name, self.label, self.build, self.uses = "", label, build, uses


class Many:
    """The run of KEYS or ARGV after the declared ones (BUILD(k, call) -> iterable); LABEL is how
    the header names the run (at its ``KEYS[n ..]``/``ARGV[n...]``, or in its prose)."""

    __slots__ = ("label", "build", "uses")

    def __init__(self, label: str, build: Callable, *uses: str):
        self.label, self.build, self.uses = label, build, uses


def _same(raw):
    return raw


def _compiled(slots: Sequence, more: Many | None) -> Callable:
    """A function (k, call) -> the list SLOTS (then MORE's run) build, compiled once from the
    declaration into one list display, as namedtuple compiles its class: a loop calling each
    slot's build costs the request hot path (claim, done) about twice as much."""
    scope: dict = {}
    items = []
    for i, slot in enumerate(slots):
        if type(slot) is ProjectKey:
            items.append(f"k.{slot.attr}")
        elif type(slot) is Arg:
            items.append(f"call[{slot.name!r}]")
        elif type(slot) is Flag:
            items.append(f"('1' if call[{slot.name!r}] else '0')")
        else:
            scope[f"slot_{i}"] = slot.build
            items.append(f"slot_{i}(k, call)")
    if more is not None:
        scope["more"] = more.build
        items.append("*more(k, call)")
    exec(f"def build(k, call):\n    return [{', '.join(items)}]\n", scope)  # noqa: S102
    return scope["build"]


class Binding:
    """One Lua script's call (see the module's docstring). ``binding(conn, k, **keywords)``
    runs it; ``keys``/``argv`` build what it sends; ``codes`` and ``Reply`` describe replies."""

    def __init__(
        self,
        name: str,
        *,
        keys: Sequence,
        args: dict | None = None,
        more_keys: Many | None = None,
        more_args: Many | None = None,
        reply: Callable = _same,
        shape: type | None = None,
        codes: type,
        defaults: dict | None = None,
    ):
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
        # _keys(k, call) and _argv(k, call): the lists sent, built as declared.
        self._keys = _compiled(self.key_slots, more_keys)
        self._argv = _compiled(self.arg_slots, more_args)

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
        return tuple(self._keys(k, {**self.defaults, **keywords}))

    def argv(self, k=None, /, **keywords) -> tuple:
        """The ARGV a call with KEYWORDS sends."""
        return tuple(self._argv(k, self.call(keywords)))

    def __call__(self, conn, k=None, /, **keywords):
        """Run the script on CONN for K's project (none for the global scripts): its reply."""
        call = self.call(keywords)
        return self.reply(run(conn, self.name, self._keys(k, call), self._argv(k, call)))

    def send(self, conn, keys: Sequence, argv: Sequence):
        """The raw reply to KEYS and ARGV as given: for tests that send what no caller would."""
        return run(conn, self.name, keys, argv)

    def __repr__(self) -> str:
        return f"<binding of {self.name}>"
