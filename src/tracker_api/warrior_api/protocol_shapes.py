"""The warrior protocol's shapes (docs/protocol.md), for the declarations on its responders.

They describe what the routes answer and never change it: seesaw clients and grab scripts read
these answers as the open-source universal-tracker gave them. A claim that finds nothing, is
rate limited or blocked is answered with an empty body under the app's default media type
(application/json); a refusal is one line of text (tracker_api.web.errors.answer).
"""

from __future__ import annotations

from tracker_api.web.api_spec import (
    ANY_OBJECT,
    INT,
    JSON,
    NULLABLE_INT,
    NULLABLE_STR,
    STR,
    TEXT_PLAIN,
    Answer,
    example,
    integer,
    json_answer,
    mapping,
    obj,
    text,
    text_answer,
)
from tracker_core import keyspace
from tracker_core.compiled import protocol

DOWNLOADER = {"type": "string", "pattern": "^" + keyspace.DOWNLOADER_RE.pattern.replace("\\Z", "$")}
VERSION = text(64, 0)
ITEMS = {"type": "string", "description": "one name, or several joined by NUL"}
CLAIM_BODY = example(
    obj(
        ("downloader",),
        downloader=DOWNLOADER,
        api_version={"type": "string", "description": '"2": a JSON answer; anything else: bare text'},
        version=VERSION,
    ),
    {"downloader": "alice", "api_version": "2", "version": "20240101.01"},
)
DONE_FIELDS = {
    "downloader": DOWNLOADER,
    "version": VERSION,
    "item": ITEMS,
    "bytes": mapping(integer(0)),
    "id": {"description": "anything the client wants logged with the done"},
}
DONE_BODY = example(
    obj(("downloader", "item"), **DONE_FIELDS),
    {
        "downloader": "alice",
        "item": "https://example.com/page/1?q=a%20b#frag",
        "bytes": {"data": 1234},
        "version": "20240101.01",
    },
)
DONE_REQUEST_BODY = example(
    obj(("downloader",), **DONE_FIELDS, api_version=STR),
    {
        "downloader": "alice",
        "api_version": "2",
        "item": "https://example.com/page/2?q=a%20b#frag",
        "bytes": {"data": 1},
    },
)
RELEASE_BODY = example(
    obj(("item",), item=ITEMS, downloader=DOWNLOADER),
    {"item": "https://example.com/page/3?q=a%20b#frag", "downloader": "alice"},
)
UPLOAD_BODY = example(
    obj(("downloader",), downloader=DOWNLOADER, item_name=STR, version=VERSION),
    {"downloader": "alice", "item_name": "https://example.com/page/1?q=a%20b#frag"},
)
UPLOADED_BODY = obj(
    ("uploader", "item"), uploader=DOWNLOADER, item=text(protocol.MAX_ITEM_CHARS), server=text(512, 0)
)

EMPTY_JSON = {JSON: None}  # no body, the app's default media type
CLAIMED = {
    200: Answer(
        "the items claimed: JSON with api_version 2 (plus the project's extra_parameters), else the bare name",
        {JSON: obj(("item_name",), item_name=ITEMS), TEXT_PLAIN: STR},
    ),
    403: Answer("blocked (empty body)", EMPTY_JSON),
    404: Answer("no item available (empty body), or an unknown project (a line)", EMPTY_JSON),
    429: Answer("rate limited (empty body): retry later", EMPTY_JSON),
    455: text_answer("the client's version is older than the project's min_version"),
}
# What a claim answers and refuses, with request or done+request: the declaration's other fields.
CLAIMING = {"body_required": True, "answers": CLAIMED, "refuses": (400, 413, 455)}
OK = {200: text_answer("done (also for names that were not out: counted, nothing changed)", {"const": "OK"})}
UPLOAD_TARGET = {200: json_answer(obj(upload_target=STR), "a target, or {} when there is none")}
ITEM_STATUS = {
    200: json_answer(
        obj(
            ("status",),
            status=NULLABLE_STR,
            downloader=NULLABLE_STR,
            queue=NULLABLE_STR,
            claims=NULLABLE_INT,
            since=NULLABLE_INT,
        ),
        "where the item is (Redis only)",
    )
}
ITEM_PATH = {"item": {"type": "string", "pattern": "\\.json$", "description": "NAME.json, percent-encoded"}}
BACKFEED_QUERY = {
    "delimiter": text(16),
    "itemseparator": text(16),
    "shard": {"type": "string", "pattern": "^[A-Za-z0-9_.:-]{1,64}$"},
}
BACKFEED_ANSWERS = {
    200: json_answer(obj(("status_code", "data"), status_code=INT, data=STR), "queued for deduplication")
}
WARRIOR_ID = {200: json_answer(obj(("warrior_id",), warrior_id=STR))}
PROJECTS_DOCUMENT = {200: json_answer(ANY_OBJECT, "the projects document (seesaw's projects.json)")}
