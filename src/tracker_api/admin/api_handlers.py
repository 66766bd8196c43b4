"""The admin API's handlers: each turns a Call into one admin verb's arguments and returns its answer.

A handler is `(call) -> a JSON-ready answer`; admin_api.py routes to it after the token check and
encodes what it returns. The verbs (tracker_core.admin) validate, act and audit; a handler only
reads and types its input (admin_request.py).
"""

from __future__ import annotations

from tracker_api.admin.api_request import (
    Call,
    bool_field,
    cursor_field,
    int_field,
    query,
    required,
    setting_values,
    str_field,
)
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


def list_projects(c: Call):
    return {"projects": [n for n in project_verbs.list_projects(c.ctx) if c.token.allows(n)]}


def create_project(c: Call):
    body = c.body(("project", "settings", "shards"))
    name = str_field(body, "project", 64)
    values = body.get("settings")
    if values is not None and type(values) is not dict:
        raise BadInput("'settings' must be an object")
    return project_verbs.create(c.ctx, name, setting_values(values or {}), shards=body.get("shards", 1))


def grow_project(c: Call):
    body = c.body(("shards",))
    return project_verbs.grow(c.ctx, c.project_name, required(body, "shards"))


def show_project(c: Call):
    return project_verbs.show(c.ctx, c.project_name)


def delete_project(c: Call):
    return _bodiless(c, project_verbs.delete)


def set_settings(c: Call):
    return project_verbs.set_settings(c.ctx, c.project_name, setting_values(c.body()))


def pause(c: Call):
    return _bodiless(c, project_verbs.pause)


def resume(c: Call):
    return _bodiless(c, project_verbs.resume)


def queues(c: Call):
    return census_verbs.status(c.ctx, c.project_name)


def add_items(c: Call):
    c.ctx.keys(c.project_name)  # an unknown project is a 404 before its upload is read
    return item_verbs.add(c.ctx, c.project_name, c.uploaded_names(), queue=c.params["queue"])


def count_queue(c: Call):
    return item_verbs.count(c.ctx, c.project_name, c.params["queue"])


@query("count")
def sample(c: Call):
    count = c.int_param("count", 20, 1, checks.MAX_SAMPLE)
    return item_verbs.sample(c.ctx, c.project_name, c.params["queue"], count)


def clear(c: Call):
    return _bodiless(c, item_verbs.clear, "queue")


def move(c: Call):
    body = c.body(("to", "pattern", "cursor", "limit"))
    return item_verbs.move(
        c.ctx,
        c.project_name,
        c.params["queue"],
        str_field(body, "to", 100),
        pattern=str_field(body, "pattern", checks.MAX_PATTERN_CHARS, "*"),
        cursor=cursor_field(body),
        limit=int_field(body, "limit", 1000, 1, checks.MAX_PAGE),
    )


@query("cursor", "count", "pattern")
def claims(c: Call):
    return claim_verbs.list_claims(
        c.ctx,
        c.project_name,
        cursor=c.cursor_param(),
        count=c.int_param("count", 100, 1, checks.MAX_PAGE),
        pattern=c.str_param("pattern", "*", checks.MAX_PATTERN_CHARS),
    )


def release(c: Call):
    body = c.body(("downloader", "older_than_s", "pattern", "cursor", "limit"))
    chosen = {k: body[k] for k in ("downloader", "older_than_s", "pattern") if body.get(k) is not None}
    return claim_verbs.release(
        c.ctx,
        c.project_name,
        **chosen,
        cursor=cursor_field(body),
        limit=int_field(body, "limit", 1000, 1, checks.MAX_PAGE),
    )


def block(c: Call):
    """A project's block (the project's route) or a global one (/api/admin/blocks)."""
    body = c.body(("entry", "remove"))
    return limit_verbs.block(c.ctx, str_field(body, "entry", 200), c.project, bool_field(body, "remove"))


def upload_target(c: Call):
    body = c.body(("url", "state"))
    return project_verbs.set_upload_target(
        c.ctx, c.project_name, str_field(body, "url", 2000), str_field(body, "state", 10, "active")
    )


@query("count", "before")
def project_audit(c: Call):
    return _audit_page(c, c.project)


@query("count", "before")
def global_audit(c: Call):
    return _audit_page(c, None)


def _audit_page(c: Call, project: str | None):
    # A deleted project's log stays readable: the verb checks the name, not the project.
    return log_verbs.audit_page(
        c.ctx, project, c.int_param("count", 100, 1, audit.MAX_PAGE), c.str_param("before", None, 41)
    )


def list_tokens(c: Call):
    return token_verbs.list_tokens(c.ctx)


def create_token(c: Call):
    body = c.body(("scope", "note", "read_only", "expires"))
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


def revoke_token(c: Call):
    c.body(())
    return token_verbs.revoke(c.ctx, c.params["token_id"])


@query("offset", "count")
def warriors(c: Call):
    return hq_verbs.warriors(c.ctx, c.int_param("offset", 0, 0, 10**9), c.int_param("count", 100, 1, 1000))


def set_hq(c: Call):
    return hq_verbs.set_fields(c.ctx, c.body())


# pattern and item-type limits


def list_limits(c: Call):
    return {"limits": limit_verbs.list_limits(c.ctx, c.project_name)}


def add_limit(c: Call):
    body = c.body(("name", "pattern", "rate", "reclassify"))
    return limit_verbs.add(
        c.ctx,
        c.project_name,
        required(body, "name"),
        required(body, "pattern"),
        required(body, "rate"),
        bool_field(body, "reclassify", True),
    )


def remove_limit(c: Call):
    return _bodiless(c, limit_verbs.remove, "name")


def reclassify(c: Call):
    return _bodiless(c, limit_verbs.reclassify)


# backfeed secrets and shards


def list_backfeed_secrets(c: Call):
    return {"secrets": backfeed_verbs.list_secrets(c.ctx, c.project_name)}


def create_backfeed_secret(c: Call):
    return _bodiless(c, backfeed_verbs.create_secret)


def revoke_backfeed_secret(c: Call):
    return _bodiless(c, backfeed_verbs.revoke_secret, "secret_id")


@query("cursor", "count")
def shard_map(c: Call):
    return backfeed_verbs.shard_map(
        c.ctx, c.project_name, c.int_param("cursor", 0), c.int_param("count", 1000, 1, checks.MAX_PAGE)
    )


def map_shard(c: Call):
    body = c.body(("queue",))
    return backfeed_verbs.map_shard(c.ctx, c.project_name, c.params["shard"], str_field(body, "queue", 100))


def unmap_shard(c: Call):
    return _bodiless(c, backfeed_verbs.unmap_shard, "shard")


# dead items and segments


@query("cursor", "count")
def list_dead(c: Call):
    return dead_verbs.list_dead(
        c.ctx, c.project_name, c.cursor_param(), c.int_param("count", 100, 1, checks.MAX_PAGE)
    )


def requeue_dead(c: Call):
    body = c.body(("items", "all", "queue", "cursor", "limit"))
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


def list_segments(c: Call):
    return segment_verbs.list_segments(c.ctx, c.project_name)


@query("kind", "since", "downloader", "item", "cursor", "limit")
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


@query("name")
def item_story(c: Call):
    """An item's whole story (tracker_core.admin.item_story): the segment files and the done log
    searched; what this node could not read is named in "unread"."""
    name = c.str_param("name", None, checks.MAX_ITEM_CHARS)
    if name is None:
        raise BadInput("give the item's name: ?name=NAME, percent-encoded")
    return item_verbs.story(c.ctx, c.project_name, c.segments_dir, [name], STORY_BUDGET_S)[0]


def redo_items(c: Call):
    """Re-queue done or seen items on purpose: by names, or a page of done items by pattern."""
    body = c.body(("items", "pattern", "queue", "cursor", "limit", "even_if_offloaded"))
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
