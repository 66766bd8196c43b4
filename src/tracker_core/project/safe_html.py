"""HTML that an admin writes and other people's browsers render, kept to an allowlist.

Two settings are HTML: a project's ``marker_html`` (in projects.json, which warriors and the HQ
map insert as markup; a project-scoped admin token can set it) and the HQ's
``tracker_banner_html`` (the front page). Both go through ``clean`` when they are set (the admin
verbs, so the API, the CLI and the pages alike) and again when they are served, so a value
stored before this rule, or written to Redis by other means, is cleaned too.

The cleaning is nh3's (Python bindings of Ammonia, the Rust HTML sanitiser, which parses as
browsers do with html5ever): only the tags below survive, with only the attributes below; links
only to http(s) URLs (no javascript:, data: or relative ones, which would resolve against
whichever page inserts them) and always with ``rel="noopener noreferrer"``; ``script`` and
``style`` go with their content; comments go. No image, frame, form, SVG, MathML, event handler,
``style`` or ``class`` attribute can pass: nothing that runs, loads from elsewhere or restyles the
page around it.
"""

from __future__ import annotations

import functools

import nh3

TAGS = frozenset(
    {"a", "abbr", "b", "br", "code", "em", "i", "li", "ol", "p", "s", "small", "span", "strong"}
    | {"sub", "sup", "u", "ul"}
)
ATTRIBUTES = {"a": {"href", "title"}, "abbr": {"title"}, "span": {"title"}}
URL_SCHEMES = frozenset({"http", "https"})

_CLEANER = nh3.Cleaner(
    tags=set(TAGS),
    clean_content_tags={"script", "style"},
    attributes={tag: set(names) for tag, names in ATTRIBUTES.items()},
    url_schemes=set(URL_SCHEMES),
    url_relative="deny",
    link_rel="noopener noreferrer",
    strip_comments=True,
)


# What is cleaned is bounded where it is set (bounded_clean) and where it is stored: the cache
# holds at most this many values of at most a few tens of KB.
@functools.lru_cache(maxsize=256)
def clean(html: str) -> str:
    """HTML kept to the allowlist above (idempotent). Cached: projects.json cleans every listed
    project's marker at each render, and the values rarely change."""
    return _CLEANER.clean(html)


def bounded_clean(html: str, limit: int) -> str:
    """HTML as it is stored: cleaned, and at most LIMIT characters once cleaned (cleaning may
    lengthen it: escaped characters, the links' rel), so the stored value, given again as it is
    (an admin form shows it), passes again. ValueError with the reason otherwise; a text over
    twice LIMIT is refused before it is parsed."""
    if len(html) > 2 * limit:
        raise ValueError(f"must be at most {limit} characters")
    cleaned = clean(html)
    if len(cleaned) > limit:
        raise ValueError(f"must be at most {limit} characters once sanitised (it has {len(cleaned)})")
    return cleaned
