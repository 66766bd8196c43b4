"""The admin API's handlers: each turns a Call into one admin verb's arguments and returns its answer.

A handler is `(call) -> a JSON-ready answer`, declared once with what it reads and answers
(``@declare``: the API's description, and the body fields and query parameters it takes);
admin_api.py routes to it after the token check and
encodes what it returns. The verbs (tracker_core.admin) validate, act and audit; a handler only
reads and types its input (admin_request.py).
"""

from __future__ import annotations

from tracker_api.admin import api_shapes
from tracker_api.admin.api_request import (
    Call,
    bool_field,
    cursor_field,
    int_field,
    required,
    setting_values,
    str_field,
)
from tracker_api.web.api_spec import declare
from tracker_api.web.errors import Refused
from tracker_core.access import audit
from tracker_core.access.tokens import MAX_NOTE, MAX_SCOPE_PROJECTS
from tracker_core.admin import (
    backfeed_verbs,
    census_verbs,
    checks,
    claim_verbs,
    dead_verbs,
    hq_verbs,
    item_verbs,
    limit_verbs,
    log_verbs,
    project_verbs,
    segment_verbs,
    token_verbs,
)
from tracker_core.admin.errors import BadInput
from tracker_core.admin.item_story import STORY_BUDGET_S
from tracker_core.donelog import log_archive, log_reader


def _bodiless(c: Call, verb, *path_params: str):
    """Run VERB(ctx, project, each of PATH_PARAMS) for a change that takes no body (a body with
    any field is refused)."""
    c.body(())
    return verb(c.ctx, c.project, *(c.params[name] for name in path_params))


@declare("List the projects the token sees", answers=api_shapes.PROJECTS)
def list_projects(c: Call):
    return {"projects": [n for n in project_verbs.list_projects(c.ctx) if c.token.allows(n)]}


@declare("Create a project", body=api_shapes.CREATE_PROJECT_BODY, answers=api_shapes.CREATED, refuses=(409,))
def create_project(c: Call):
    body = c.body()
    name = str_field(body, "project", 64)
    values = body.get("settings")
    if values is not None and type(values) is not dict:
        raise BadInput("'settings' must be an object")
    return project_verbs.create(c.ctx, name, setting_values(values or {}), shards=body.get("shards", 1))


@declare("Add shards to a project", body=api_shapes.GROW_BODY, answers=api_shapes.GROWN, refuses=(409,))
def grow_project(c: Call):
    body = c.body()
    return project_verbs.grow(c.ctx, c.project_name, required(body, "shards"))


@declare("A project's settings, upload targets and blocks", answers=api_shapes.PROJECT)
def show_project(c: Call):
    return project_verbs.show(c.ctx, c.project_name)


@declare("Delete a project and everything it holds", answers=api_shapes.DELETED)
def delete_project(c: Call):
    return _bodiless(c, project_verbs.delete)


@declare("Change settings", body=api_shapes.SETTINGS_BODY, answers=api_shapes.SETTINGS_AGE, refuses=(409,))
def set_settings(c: Call):
    return project_verbs.set_settings(c.ctx, c.project_name, setting_values(c.body()))


@declare("Pause: no claims until resumed", answers=api_shapes.PAUSED)
def pause(c: Call):
    return _bodiless(c, project_verbs.pause)


@declare("Resume claims", answers=api_shapes.PAUSED)
def resume(c: Call):
    return _bodiless(c, project_verbs.resume)


@declare("Where every item is (the census)", answers=api_shapes.PROJECT_STATUS)
def queues(c: Call):
    return census_verbs.status(c.ctx, c.project_name)


@declare(
    'Add items: JSON {"items": [...]} or text, one per line',
    body=api_shapes.ITEMS_BODY,
    body_types=api_shapes.JSON_OR_TEXT,
    answers=api_shapes.ADDED,
)
def add_items(c: Call):
    c.ctx.keys(c.project_name)  # an unknown project is a 404 before its upload is read
    return item_verbs.add(c.ctx, c.project_name, c.uploaded_names(), queue=c.params["queue"])


@declare("Count a queue", answers=api_shapes.COUNT)
def count_queue(c: Call):
    return item_verbs.count(c.ctx, c.project_name, c.params["queue"])


@declare("A sample of a queue", query=api_shapes.SAMPLE_QUERY, answers=api_shapes.SAMPLE)
def sample(c: Call):
    count = c.int_param("count", 20, 1, checks.MAX_SAMPLE)
    return item_verbs.sample(c.ctx, c.project_name, c.params["queue"], count)


@declare("Empty a queue", answers=api_shapes.CLEARED)
def clear(c: Call):
    return _bodiless(c, item_verbs.clear, "queue")


@declare("Move a page of a queue to another", body=api_shapes.MOVE_BODY, answers=api_shapes.MOVED)
def move(c: Call):
    body = c.body()
    return item_verbs.move(
        c.ctx,
        c.project_name,
        c.params["queue"],
        str_field(body, "to", 100),
        pattern=str_field(body, "pattern", checks.MAX_PATTERN_CHARS, "*"),
        cursor=cursor_field(body),
        limit=int_field(body, "limit", 1000, 1, checks.MAX_PAGE),
    )


@declare("A page of the items out", query=api_shapes.CLAIMS_QUERY, answers=api_shapes.CLAIMS)
def claims(c: Call):
    return claim_verbs.list_claims(
        c.ctx,
        c.project_name,
        cursor=c.cursor_param(),
        count=c.int_param("count", 100, 1, checks.MAX_PAGE),
        pattern=c.str_param("pattern", "*", checks.MAX_PATTERN_CHARS),
    )


@declare("Give back a page of claims", body=api_shapes.RELEASE_BODY, answers=api_shapes.RELEASED)
def release(c: Call):
    body = c.body()
    chosen = {k: body[k] for k in ("downloader", "older_than_s", "pattern") if body.get(k) is not None}
    return claim_verbs.release(
        c.ctx,
        c.project_name,
        **chosen,
        cursor=cursor_field(body),
        limit=int_field(body, "limit", 1000, 1, checks.MAX_PAGE),
    )


@declare(
    "Block or unblock an IP, a CIDR range or a downloader",
    body=api_shapes.BLOCK_BODY,
    answers=api_shapes.BLOCKED,
    refuses=(409,),
)
def block(c: Call):
    """A project's block (the project's route) or a global one (/api/admin/blocks)."""
    body = c.body()
    return limit_verbs.block(c.ctx, str_field(body, "entry", 200), c.project, bool_field(body, "remove"))


@declare(
    "Add, change or remove an upload target",
    body=api_shapes.UPLOAD_TARGET_BODY,
    answers=api_shapes.UPLOAD_TARGET,
)
def upload_target(c: Call):
    body = c.body()
    return project_verbs.set_upload_target(
        c.ctx, c.project_name, str_field(body, "url", 2000), str_field(body, "state", 10, "active")
    )


@declare(
    "A page of the project's audit log, newest first",
    query=api_shapes.AUDIT_QUERY,
    answers=api_shapes.AUDIT_PAGE,
)
def project_audit(c: Call):
    return _audit_page(c, c.project)


@declare("A page of the audit log, newest first", query=api_shapes.AUDIT_QUERY, answers=api_shapes.AUDIT_PAGE)
def global_audit(c: Call):
    return _audit_page(c, None)


def _audit_page(c: Call, project: str | None):
    # A deleted project's log stays readable: the verb checks the name, not the project.
    return log_verbs.audit_page(
        c.ctx, project, c.int_param("count", 100, 1, audit.MAX_PAGE), c.str_param("before", None, 41)
    )


@declare("List the admin tokens", answers=api_shapes.TOKENS)
def list_tokens(c: Call):
    return token_verbs.list_tokens(c.ctx)


@declare("Create an admin token (shown once)", body=api_shapes.TOKEN_BODY, answers=api_shapes.TOKEN)
def create_token(c: Call):
    body = c.body()
    scope = body.get("scope")
    if type(scope) is list:  # ["p1", "p2"] as well as "p1,p2"
        if not scope or len(scope) > MAX_SCOPE_PROJECTS or any(type(n) is not str for n in scope):
            raise BadInput(f"'scope' as a list: 1 to {MAX_SCOPE_PROJECTS} project names")
        scope = ",".join(scope)
    return token_verbs.create(
        c.ctx,
        str_field({"scope": scope}, "scope", token_verbs.MAX_SCOPE_CHARS),
        str_field(body, "note", MAX_NOTE, "", True),
        bool_field(body, "read_only"),
        str_field(body, "expires", token_verbs.MAX_EXPIRY_CHARS, "", True),
    )


@declare("Revoke an admin token", answers=api_shapes.REVOKED)
def revoke_token(c: Call):
    c.body(())
    return token_verbs.revoke(c.ctx, c.params["token_id"])


@declare("The registered warriors", query=api_shapes.WARRIORS_QUERY, answers=api_shapes.WARRIORS)
def warriors(c: Call):
    return hq_verbs.warriors(c.ctx, c.int_param("offset", 0, 0, 10**9), c.int_param("count", 100, 1, 1000))


@declare("Set the warrior HQ's fields", body=api_shapes.HQ_BODY, answers=api_shapes.HQ)
def set_hq(c: Call):
    return hq_verbs.set_fields(c.ctx, c.body())


# pattern and item-type limits


@declare("The pattern and item-type limits", answers=api_shapes.LIMITS)
def list_limits(c: Call):
    return {"limits": limit_verbs.list_limits(c.ctx, c.project_name)}


@declare("Add a limit", body=api_shapes.LIMIT_BODY, answers=api_shapes.LIMIT_ADDED)
def add_limit(c: Call):
    body = c.body()
    return limit_verbs.add(
        c.ctx,
        c.project_name,
        required(body, "name"),
        required(body, "pattern"),
        required(body, "rate"),
        bool_field(body, "reclassify", True),
    )


@declare("Remove a limit", answers=api_shapes.LIMIT_REMOVED)
def remove_limit(c: Call):
    return _bodiless(c, limit_verbs.remove, "name")


@declare("Classify the queued items again", answers=api_shapes.HELD)
def reclassify(c: Call):
    return _bodiless(c, limit_verbs.reclassify)


# backfeed secrets and shards


@declare("The backfeed secrets (ids only)", answers=api_shapes.SECRETS)
def list_backfeed_secrets(c: Call):
    return {"secrets": backfeed_verbs.list_secrets(c.ctx, c.project_name)}


@declare("Create a backfeed secret (shown once)", answers=api_shapes.SECRET)
def create_backfeed_secret(c: Call):
    return _bodiless(c, backfeed_verbs.create_secret)


@declare("Revoke a backfeed secret", answers=api_shapes.REVOKED)
def revoke_backfeed_secret(c: Call):
    return _bodiless(c, backfeed_verbs.revoke_secret, "secret_id")


@declare("A page of the backfeed shard map", query=api_shapes.SHARD_MAP_QUERY, answers=api_shapes.SHARD_MAP)
def shard_map(c: Call):
    return backfeed_verbs.shard_map(
        c.ctx, c.project_name, c.int_param("cursor", 0), c.int_param("count", 1000, 1, checks.MAX_PAGE)
    )


@declare("Send a backfeed shard to a queue", body=api_shapes.MAP_SHARD_BODY, answers=api_shapes.SHARD_QUEUE)
def map_shard(c: Call):
    body = c.body()
    return backfeed_verbs.map_shard(c.ctx, c.project_name, c.params["shard"], str_field(body, "queue", 100))


@declare("Send a backfeed shard back to the backfeed queue", answers=api_shapes.SHARD_QUEUE)
def unmap_shard(c: Call):
    return _bodiless(c, backfeed_verbs.unmap_shard, "shard")


# dead items and segments


@declare("A page of the dead items with their history", query=api_shapes.DEAD_QUERY, answers=api_shapes.DEAD)
def list_dead(c: Call):
    return dead_verbs.list_dead(
        c.ctx, c.project_name, c.cursor_param(), c.int_param("count", 100, 1, checks.MAX_PAGE)
    )


@declare(
    "Requeue dead items: names, or a page of all", body=api_shapes.REQUEUE_BODY, answers=api_shapes.REQUEUED
)
def requeue_dead(c: Call):
    body = c.body()
    queue = str_field(body, "queue", 100, "todo")
    everything = bool_field(body, "all")
    if everything == (body.get("items") is not None):
        raise BadInput("give 'items' (a list of names) or \"all\": true")
    if everything:
        return dead_verbs.requeue_page(
            c.ctx,
            c.project_name,
            cursor_field(body),
            int_field(body, "limit", 1000, 1, checks.MAX_PAGE),
            queue,
        )
    if body.get("cursor") is not None or body.get("limit") is not None:
        raise BadInput("'cursor' and 'limit' go with \"all\": true")
    return dead_verbs.requeue(c.ctx, c.project_name, body["items"], queue)


@declare("The offloaded segments", answers=api_shapes.SEGMENTS)
def list_segments(c: Call):
    return segment_verbs.list_segments(c.ctx, c.project_name)


@declare(
    "A page of the done, uploads or bad_dones log",
    query=api_shapes.LOG_QUERY,
    answers=api_shapes.LOG_PAGE,
    refuses=(503,),
)
def log_page(c: Call):
    """A page of the done log (archived segments, then the stream), or of the uploads or
    bad_dones streams, oldest first; "cursor" in the answer continues it (null: the end)."""
    try:
        return log_verbs.done_page(
            c.ctx,
            c.project_name,
            c.segments_dir,
            kind=c.str_param("kind", "done", 20),
            since=c.str_param("since", None, 40),
            downloader=c.str_param("downloader", None, 64),
            cursor=c.str_param("cursor", None, 41),
            limit=c.int_param("limit", 100, 1, log_reader.PAGE_MAX),
            item=c.str_param("item", None, checks.MAX_ITEM_CHARS),
        )
    except log_archive.LogUnreadable as exc:  # this node does not see the segment files
        raise Refused(503, str(exc), "admin_log_unreadable", c.project) from None


@declare("An item's whole story", query=api_shapes.STORY_QUERY, answers=api_shapes.STORY)
def item_story(c: Call):
    """An item's whole story (tracker_core.admin.item_story): the segment files and the done log
    searched; what this node could not read is named in "unread"."""
    name = c.str_param("name", None, checks.MAX_ITEM_CHARS)
    if name is None:
        raise BadInput("give the item's name: ?name=NAME, percent-encoded")
    return item_verbs.story(c.ctx, c.project_name, c.segments_dir, [name], STORY_BUDGET_S)[0]


@declare(
    "Re-queue done or seen items", body=api_shapes.REDO_BODY, answers=api_shapes.REQUEUED, refuses=(409,)
)
def redo_items(c: Call):
    """Re-queue done or seen items on purpose: by names, or a page of done items by pattern."""
    body = c.body()
    if body.get("items") is not None and (body.get("cursor") is not None or body.get("limit") is not None):
        raise BadInput("'cursor' and 'limit' go with 'pattern'")
    return item_verbs.redo(
        c.ctx,
        c.project_name,
        names=body.get("items"),
        pattern=body.get("pattern"),
        cursor=cursor_field(body),
        limit=int_field(body, "limit", 1000, 1, checks.MAX_PAGE),
        queue=str_field(body, "queue", 100, item_verbs.REDO_QUEUE),
        even_if_offloaded=bool_field(body, "even_if_offloaded"),
    )
