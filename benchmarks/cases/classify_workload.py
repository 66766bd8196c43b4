"""A reproducible 1,000-pattern limit set and item names for the classification benchmarks."""

import random
import re

PATTERN_MIX = {"domain": 300, "type": 300, "prefix": 250, "anchored regex": 100, "regex": 50}


def make_patterns(seed: int = 5) -> list:
    """Return 1,000 patterns in the mix PATTERN_MIX (fast forms first, as admins tend to add)."""
    rng = random.Random(seed)
    patterns = [f"domain:site{i}.example{i % 7}.org" for i in range(PATTERN_MIX["domain"])]
    patterns += [f"type:kind{i}" for i in range(PATTERN_MIX["type"])]
    patterns += [f"prefix:https://cdn{i}.media.net/" for i in range(PATTERN_MIX["prefix"])]
    patterns += [f"regex:^post{i}:[0-9]+$" for i in range(PATTERN_MIX["anchored regex"])]
    patterns += [f"regex:/tag{i}/[a-z]+" for i in range(PATTERN_MIX["regex"])]
    rng.shuffle(patterns)
    return patterns


def make_names(count: int, seed: int = 7) -> list:
    """Return COUNT names: a third URLs, a third `type:value`, a third plain ids; ~half match."""
    rng = random.Random(seed)
    names = []
    for i in range(count):
        n, roll = rng.randrange(600), i % 6
        if roll == 0:
            names.append(f"https://www.site{n}.example{n % 7}.org/page/{i}")
        elif roll == 1:
            names.append(f"https://cdn{n}.media.net/img/{i}.jpg")
        elif roll == 2:
            names.append(f"kind{n}:user{i}")
        elif roll == 3:
            names.append(f"post{n % 200}:{i}")
        elif roll == 4:
            names.append(f"http://blog{n}.host.com/tag{n % 100}/words")
        else:
            names.append(f"item-{i:08d}")
    return names


def as_regex(pattern: str) -> str:
    """Translate one pattern into the regular expression a plain `re` approach would use."""
    kind, _, value = pattern.partition(":")
    if kind == "type":
        return "^" + re.escape(value) + ":"
    if kind == "prefix":
        return "^" + re.escape(value)
    if kind == "domain":
        return r"^(?:[a-z]+://)?(?:[^/?#@]*@)?(?:[^/?#:]*\.)?" + re.escape(value) + r"(?:[:/?#]|$)"
    return value


def alternation(patterns: list):
    """Compile the baseline: one `re` alternation of all patterns."""
    return re.compile("|".join(f"(?:{as_regex(p)})" for p in patterns))
