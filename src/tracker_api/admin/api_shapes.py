"""The admin API's shapes: what its handlers' declarations (api_spec.declare, in api_handlers.py)
name for their bodies, query parameters and answers, after tracker_core.admin's contract table.

Answers list the keys a verb always returns; a verb may add keys (the objects stay open), so a
client reads what it knows and keeps working when a verb says more.
"""

from __future__ import annotations

from tracker_api.web.api_spec import (
    ANY_OBJECT,
    BOOL,
    INT,
    INT_OR_STR,
    JSON,
    NULLABLE_INT,
    NULLABLE_STR,
    NUM,
    STR,
    STRINGS,
    TEXT_PLAIN,
    Answer,
    Schema,
    array,
    closed_obj,
    example,
    integer,
    json_answer,
    mapping,
    obj,
    text,
)
from tracker_core.access import audit, tokens
from tracker_core.admin import checks
from tracker_core.donelog import log_reader
from tracker_core.notify import hooks

CURSOR = INT_OR_STR  # an int on a one-shard project, "SHARD:CURSOR" text on a sharded one
PAGE = integer(1, checks.MAX_PAGE)
PATTERN = text(checks.MAX_PATTERN_CHARS)
ITEM_NAMES = array(text(checks.MAX_ITEM_CHARS))
ANY: Schema = {}  # any JSON value
SETTING_VALUE: Schema = {"type": ["string", "number", "boolean"]}
JSON_OR_TEXT = (JSON, TEXT_PLAIN)


def answer(**keys: Schema) -> dict[int, Answer]:
    """A 200 with a JSON object that always holds KEYS."""
    return {200: json_answer(obj(tuple(keys), **keys))}


PAGED = {"cursor": CURSOR}
SETTINGS_AGE = answer(settings_age=INT)
PAUSED = answer(settings_age=INT, paused=BOOL)
REVOKED = answer(revoked=STR)
SHARD_QUEUE = answer(shard=STR, queue=STR)

# projects and settings
PROJECTS = answer(projects=STRINGS)
CREATE_PROJECT_BODY = example(
    closed_obj(("project",), project=text(64), settings=mapping(SETTING_VALUE), shards=INT),
    {"project": "new-project", "settings": {"rate_limit": 600}},
)
CREATED = answer(created=STR, shards=INT)
GROWN = answer(project=STR, shards=INT, before=INT)
GROW_BODY = closed_obj(("shards",), shards=INT)
PROJECT = answer(project=STR, settings=mapping(STR), upload_targets=ANY, blocked=ANY, blocked_global=ANY)
DELETED = answer(deleted=STR)
SETTINGS_BODY = example(
    mapping(SETTING_VALUE),
    {"rate_limit": 600, "paused": False},
)
UPLOAD_TARGET_BODY = example(
    closed_obj(("url",), url=text(2000), state=text(10)),
    {"url": "rsync://target.example/p/:downloader/", "state": "active"},
)
UPLOAD_TARGET = answer(url=STR, state=STR)
HQ_BODY = mapping(STR)
HQ = answer(hq=ANY_OBJECT)

# queues, claims and items
PROJECT_STATUS = answer(
    project=STR, queues=ANY_OBJECT, todo_total=INT, out=INT, dead=INT, done=INT, counters=ANY_OBJECT
)
COUNT = answer(queue=STR, count=INT)
ITEMS_BODY = example(
    closed_obj(("items",), items=STRINGS),
    {"items": ["https://example.com/new?page=1", "https://example.com/a b#c"]},
)
ADDED = answer(added=INT, duplicates=INT)
SAMPLE_QUERY = {"count": integer(1, checks.MAX_SAMPLE)}
SAMPLE = answer(items=STRINGS)
CLEARED = answer(dropped=INT)
MOVE_BODY = example(
    closed_obj(("to",), to=text(100), pattern=PATTERN, cursor=CURSOR, limit=PAGE),
    {"to": "secondary", "pattern": "https://example.com/*"},
)
MOVED = answer(moved=INT, **PAGED)
CLAIMS_QUERY = {"cursor": STR, "count": integer(1, checks.MAX_PAGE), "pattern": PATTERN}
CLAIM = {"item": STR, "downloader": STR, "ip": STR, "times_claimed": INT, "claimed_at_ms": INT}
CLAIMS = answer(claims=array(obj(tuple(CLAIM), **CLAIM)), **PAGED)
RELEASE_BODY = example(
    closed_obj(
        (),
        downloader=text(64),
        older_than_s=INT,
        pattern=PATTERN,
        cursor=CURSOR,
        limit=PAGE,
    ),
    {"older_than_s": 0},
)
RELEASED = answer(released=INT, **PAGED)
DEAD_QUERY = {"cursor": STR, "count": integer(1, checks.MAX_PAGE)}
DEAD = answer(dead=array(obj(("item",), item=STR)), **PAGED)
REQUEUE_BODY = example(
    closed_obj((), items=ITEM_NAMES, all=BOOL, queue=text(100), cursor=CURSOR, limit=PAGE),
    {"all": True},
)
REQUEUED = answer(requeued=INT)
REDO_BODY = example(
    closed_obj(
        (),
        items=ITEM_NAMES,
        pattern=PATTERN,
        queue=text(100),
        cursor=CURSOR,
        limit=PAGE,
        even_if_offloaded=BOOL,
    ),
    {"pattern": "https://example.com/*", "queue": "todo"},
)
STORY_QUERY = {"name": text(checks.MAX_ITEM_CHARS)}
# The public item status (docs/protocol.md, "Item status") and the story's keys beside it.
STORY = answer(
    item=STR,
    status=NULLABLE_STR,
    ip=NULLABLE_STR,
    rounds=array(ANY_OBJECT),
    done=array(ANY_OBJECT),
    unread=ANY,
)
SEGMENTS = answer(segments=ANY_OBJECT, offloading=INT)
LOG_QUERY = {
    "kind": text(20),
    "since": text(40),
    "downloader": text(64),
    "item": text(checks.MAX_ITEM_CHARS),
    "cursor": text(41),
    "limit": integer(1, log_reader.PAGE_MAX),
}
LOG_PAGE = answer(entries=array(ANY_OBJECT), cursor=NULLABLE_STR)

# limits and blocks
LIMIT = {"name": STR, "pattern": STR, "rate": STR, "rate_per_s": NUM, "seq": INT}
LIMITS = answer(limits=array(obj(tuple(LIMIT), **LIMIT)))
LIMIT_ADDED = answer(limit=STR, settings_age=INT)
LIMIT_REMOVED = answer(removed=STR, settings_age=INT)
LIMIT_BODY = example(
    closed_obj(
        ("name", "pattern", "rate"),
        name=text(64),
        pattern=PATTERN,
        rate={"type": ["string", "number"]},
        reclassify=BOOL,
    ),
    {"name": "pages", "pattern": "prefix:https://example.com/page/", "rate": "30/m"},
)
HELD = answer(held=INT)
BLOCK_BODY = example(
    closed_obj(("entry",), entry=text(200), remove=BOOL),
    {"entry": "name:mallory"},
)
BLOCKED = answer(entry=STR, blocked=BOOL)

# backfeed secrets and shards
SECRETS = answer(secrets=array(obj(("id", "created"), id=STR, created=INT)))
SECRET = answer(id=STR, secret=STR, path=STR)
SHARD_MAP_QUERY = {"cursor": integer(0, checks.MAX_CURSOR), "count": integer(1, checks.MAX_PAGE)}
SHARD_MAP = answer(map=ANY_OBJECT, items=ANY_OBJECT, **PAGED)
MAP_SHARD_BODY = example(
    closed_obj(("queue",), queue=text(100)),
    {"queue": "secondary"},
)
# tokens, audit, warriors
TOKEN_RECORD = {
    "token_id": STR,
    "scope": STR,
    "note": STR,
    "created_ms": INT,
    "read_only": BOOL,
    "expires_ms": NULLABLE_INT,
    "last_used_ms": NULLABLE_INT,
}
TOKENS = answer(tokens=array(obj(("token_id", "scope"), **TOKEN_RECORD)))
TOKEN_BODY = closed_obj(
    (),
    scope={"type": ["string", "array"], "items": STR},  # "*", "p1,p2" or ["p1", "p2"]
    note=text(tokens.MAX_NOTE, 0),
    read_only=BOOL,
    expires=text(40, 0),  # 30d, 12h, 90m, 60s or an ISO date
)
TOKEN = answer(token=STR, token_id=STR)
AUDIT_QUERY = {"count": integer(1, audit.MAX_PAGE), "before": text(41)}
AUDIT_ENTRY = obj(("id", "actor", "action"), id=STR, actor=STR, action=STR, project=NULLABLE_STR, detail=ANY)
AUDIT_PAGE = answer(entries=array(AUDIT_ENTRY), next=NULLABLE_STR)
WARRIORS_QUERY = {"offset": integer(0, 10**9), "count": integer(1, 1000)}
WARRIORS = answer(warriors=array(ANY_OBJECT), online=INT)

# webhooks (tracker_core.admin.webhook_verbs)
HOOK = {"hook_id": STR, "url": STR, "project": NULLABLE_STR, "events": STRINGS, "created_ms": INT}
WEBHOOKS = answer(webhooks=array(obj(tuple(HOOK), **HOOK)))
WEBHOOK_FIELDS = {"url": text(hooks.MAX_URL_CHARS), "events": {"type": ["array", "null"], "items": STR}}
GLOBAL_WEBHOOK_BODY = closed_obj(("url",), **WEBHOOK_FIELDS, project=NULLABLE_STR)
PROJECT_WEBHOOK_BODY = closed_obj(("url",), **WEBHOOK_FIELDS)
WEBHOOK = answer(**HOOK, secret=STR)
REMOVED = answer(removed=STR)
