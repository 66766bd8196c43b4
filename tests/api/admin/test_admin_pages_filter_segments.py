"""The admin pages' Bloom filter, segments (list, export as a download, import from an upload),
block reindex and item lookup, through the real app and Redis: each acts through its verb
(state asserted in Redis, audited once), each refusal is one line in its form with a 4xx that
changes nothing, a token for another project is refused, the upload's bounds hold at and past."""

import html
import io
import re
import struct
import urllib.parse

import pytest
import zstandard
from falcon import testing

from support.state import snapshot
from tracker_api.admin.api_request import MAX_UPLOAD_BYTES
from tracker_api.admin.pages import csrf_for, segment_pages
from tracker_api.app import create_app
from tracker_api.web.config import AppConfig
from tracker_core.access import tokens
from tracker_core.admin import item_verbs, limit_verbs, log_verbs, project_verbs, segment_verbs
from tracker_core.admin.errors import BadInput, NotFound
from tracker_core.keyspace import ProjectKeys
from tracker_core.maintainer import maintenance

P, OTHER, SHARDED = "pages", "other", "spread"
K = ProjectKeys(P)
URLS = [f"https://example.com/a b/{n}?q=%20x&y=1#frag/{n}" for n in range(20)]
LONG = "https://example.com/forum/thread?id=42&q=a b%20c#post-" + "x/" * 2000  # about 4 KB
OFFLOAD = {"offload_high": "10", "offload_low": "5", "offload_segment_items": "5"}


@pytest.fixture
def segdir(tmp_path):
    return tmp_path / "segments"


@pytest.fixture
def app(engine, segdir):
    return testing.TestClient(create_app(engine, config=AppConfig(segments_dir=segdir)))


@pytest.fixture
def tok(admin):
    project_verbs.create(admin, P, OFFLOAD)
    project_verbs.create(admin, OTHER)
    return {
        P: tokens.create(admin.conn, P)[0],
        OTHER: tokens.create(admin.conn, OTHER)[0],
        "global": tokens.create(admin.conn, "*")[0],
    }


def get(app, path, token):
    return app.simulate_get(path, headers={"Cookie": f"tracker_admin={token}"})


def post(app, path, fields, token):
    return app.simulate_post(
        path,
        body=urllib.parse.urlencode({"csrf": csrf_for(token), **fields}),
        headers={"Content-Type": "application/x-www-form-urlencoded", "Cookie": f"tracker_admin={token}"},
    )


def upload(app, path, data: bytes, token, queue="todo", size=None):
    """Post the import form with DATA as its file; SIZE: pad the file (a zstandard skippable frame
    after it, which readers pass over) until the whole body is SIZE bytes."""
    boundary = "----trackerboundary7MA4YWxkTrZu0gW"
    head = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="csrf"\r\n\r\n{csrf_for(token)}\r\n'
        f'--{boundary}\r\nContent-Disposition: form-data; name="queue"\r\n\r\n{queue}\r\n'
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="s.zst"\r\n'
        "Content-Type: application/zstd\r\n\r\n"
    ).encode()
    tail = f"\r\n--{boundary}--\r\n".encode()
    if size is not None:
        pad = size - len(head) - len(data) - len(tail) - 8
        data += struct.pack("<II", 0x184D2A50, pad) + b"\0" * pad
    body = head + data + tail
    assert size is None or len(body) == size
    return app.simulate_post(
        path,
        body=body,
        headers={
            "Content-Type": f"multipart/form-data; boundary={boundary}",
            "Cookie": f"tracker_admin={token}",
        },
    )


def segment_bytes(names) -> bytes:
    return zstandard.ZstdCompressor(level=3).compress("\0".join(names).encode())


def bomb(size: int, say_size: bool) -> bytes:
    """A small file that unpacks to SIZE zero bytes (its frame says how many when SAY_SIZE)."""
    packer = zstandard.ZstdCompressor().compressobj(size=size if say_size else -1)
    zeros = b"\0" * (1 << 20)
    parts = [packer.compress(zeros) for _ in range(size >> 20)]
    return b"".join([*parts, packer.compress(zeros[: size % (1 << 20)]), packer.flush()])


def offloaded(r, admin, segdir, project=P, names=URLS):
    item_verbs.add(admin, project, names)
    assert maintenance.maintain_project(r, project, segdir)["offloaded"] >= 10
    return segment_verbs.list_segments(admin, project)["segments"]


def one_error(res) -> str:
    errors = re.findall(r"<p class=error[^>]*>([^<]+)</p>", res.text)
    assert len(errors) == 1, res.text
    return html.unescape(errors[0])


# The Bloom filter


def test_the_filter_page_shows_kind_layers_fill_and_rate(app, admin, tok):
    res = get(app, f"/admin/{P}/filter", tok[P])
    assert res.status_code == 200, res.text
    assert "class=filter-kind>layered<" in res.text and "class=filter-fill>0.0%<" in res.text
    assert (
        f'action="/admin/{P}/filter"' in res.text
        and 'href="/admin/pages/filter" aria-current=page' in res.text
    )
    item_verbs.add(admin, P, URLS)
    res = get(app, f"/admin/{P}/filter", tok[P])
    assert "class=filter-items>20<" in res.text and "class=filter-fill>0.0%<" in res.text
    rows = re.findall(r"<tr><td>(\d+)</td><td>([\d,]+)</td><td>([\d,]+)</td><td>([\d.]+%)</td>", res.text)
    assert rows == [("0", "20", "1,000,000", "0.0%")]
    rate = float(re.search(r"class=filter-rate>([^<]+)<", res.text)[1])
    assert 0 < rate < 1e-20  # 20 items in a filter made for a million


def test_the_filter_form_sets_the_geometry_while_empty_then_refuses(app, r, admin, tok):
    res = post(
        app, f"/admin/{P}/filter", {"kind": "fingerprint", "capacity": "5000", "fp_rate": "1e-4"}, tok[P]
    )
    assert res.status_code == 303 and "fingerprint" in urllib.parse.unquote_plus(res.headers["location"])
    assert r.hget(K.bloom, "kind") == "fingerprint" and r.hget(K.bloom, "capacity") == "5000"
    assert log_verbs.audit_page(admin, P)["entries"][0]["action"] == "backfeed.filter"
    shown = get(app, f"/admin/{P}/filter", tok[P]).text
    assert "<th>stashed</th>" in shown and "<td>3 bytes</td>" in shown
    item_verbs.add(admin, P, URLS[:3])
    before = snapshot(r)
    for fields, status, reason in (
        ({"kind": "wide", "capacity": "100", "fp_rate": "0.01"}, 409, "already holds items"),
        ({"kind": "wide", "capacity": "many", "fp_rate": "0.01"}, 400, "'capacity' must be an integer"),
        ({"kind": "wide", "capacity": "100", "fp_rate": "nan"}, 400, "'fp_rate' must be a number"),
        ({"kind": "bitmap", "capacity": "100", "fp_rate": "0.01"}, 400, "'kind' must be one of"),
        ({"kind": "", "capacity": "", "fp_rate": ""}, 400, "give a kind"),
    ):
        res = post(app, f"/admin/{P}/filter", fields, tok[P])
        assert res.status_code == status and reason in one_error(res), res.text
        assert f'value="{fields["capacity"]}"' in res.text  # what was typed is kept
    assert snapshot(r) == before


# Segments


def test_segments_are_listed_exported_as_a_download_and_imported_back(app, r, admin, tok, segdir):
    listed = offloaded(r, admin, segdir)
    page = get(app, f"/admin/{P}/segments", tok[P])
    assert page.status_code == 200 and f'action="/admin/{P}/segment-import"' in page.text
    for number, row in listed.items():
        assert f"<tr><td>{number}</td><td>{row['items']}</td><td>{row['source']}</td>" in page.text
    number = min(listed)
    res = post(app, f"/admin/{P}/segment-export", {"segment": number}, tok[P])
    exported = res.content
    assert res.status_code == 200, res.text
    assert res.headers["content-type"] == "application/zstd"
    assert f"{P}-segment-{number}.zst" in res.headers["content-disposition"]
    names = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(res.content)).read().decode().split("\0")
    assert len(names) == listed[number]["items"] and set(names) <= set(URLS)
    assert number not in segment_verbs.list_segments(admin, P)["segments"]
    entry = log_verbs.audit_page(admin, P)["entries"][0]
    assert entry["action"] == "segments.export" and entry["actor"] != "cli"
    # Back once as the segment it was; again, through the filter, which drops every name.
    res = upload(app, f"/admin/{P}/segment-import", exported, tok[P])
    assert res.status_code == 303 and "as+segment" in res.headers["location"], res.text
    assert len(segment_verbs.list_segments(admin, P)["segments"]) == len(listed)
    again = upload(app, f"/admin/{P}/segment-import", exported, tok[P])
    assert again.status_code == 303
    assert "imported+0+items+into+todo" in again.headers["location"]
    assert log_verbs.audit_page(admin, P)["entries"][0]["action"] == "segments.import"


def test_another_projects_file_is_imported_through_the_filter(app, r, tok):
    res = upload(app, f"/admin/{P}/segment-import", segment_bytes([LONG, URLS[0]]), tok[P], queue="secondary")
    assert res.status_code == 303 and "imported+2+items+into+secondary" in res.headers["location"]
    assert r.smembers(K.secondary) == {LONG, URLS[0]}


@pytest.mark.parametrize(
    "make,reason",
    [
        (lambda: b"", "choose a segment file"),
        (lambda: b"https://example.com/not-a-segment\n", "not a segment file (zstandard)"),
        (lambda: segment_bytes(URLS)[:-9], "cut short"),
        (lambda: bomb((256 << 20) + 1, True), "may unpack to 268435456 bytes"),
        (lambda: bomb((256 << 20) + 1, False), "may unpack to 268435456 bytes"),
    ],
    ids=["empty", "text", "truncated", "bomb", "bomb-unsized"],
)
def test_bad_segment_files_are_refused_in_one_line_and_change_nothing(app, r, tok, make, reason):
    before = snapshot(r)
    res = upload(app, f"/admin/{P}/segment-import", make(), tok[P])
    assert res.status_code == 400 and reason in one_error(res), res.text
    assert f'<form method=post action="/admin/{P}/segment-import"' in res.text
    assert snapshot(r) == before


def test_the_unpacked_size_is_bounded_at_and_past_its_limit(app, r, tok, monkeypatch):
    limit = segment_pages.MAX_SEGMENT_TEXT_BYTES
    for said in (True, False):  # at the bound, with and without the size in the frame
        segment_pages.checked_segment(bomb(limit, said))
        with pytest.raises(BadInput, match="may unpack to"):
            segment_pages.checked_segment(bomb(limit + 1, said))
    # Through the form, at and past a bound lowered to the size of two URL names.
    names = [URLS[0], URLS[1]]
    size = len("\0".join(names).encode())
    monkeypatch.setattr(segment_pages, "MAX_SEGMENT_TEXT_BYTES", size)
    assert upload(app, f"/admin/{P}/segment-import", segment_bytes(names), tok[P]).status_code == 303
    monkeypatch.setattr(segment_pages, "MAX_SEGMENT_TEXT_BYTES", size - 1)
    before = snapshot(r)
    res = upload(app, f"/admin/{P}/segment-import", segment_bytes([URLS[2], URLS[3]]), tok[P])
    assert res.status_code == 400 and snapshot(r) == before


def test_the_upload_is_bounded_at_and_past_its_limit(app, r, tok):
    res = upload(app, f"/admin/{P}/segment-import", segment_bytes([LONG]), tok[P], size=MAX_UPLOAD_BYTES)
    assert res.status_code == 303, res.text[:300]
    assert r.sismember(K.todo, LONG)
    before = snapshot(r)
    res = upload(
        app, f"/admin/{P}/segment-import", segment_bytes([URLS[0]]), tok[P], size=MAX_UPLOAD_BYTES + 1
    )
    assert res.status_code == 413 and f"limit {MAX_UPLOAD_BYTES} bytes" in res.text
    assert snapshot(r) == before


def test_export_refusals_are_one_line_in_the_listing(app, r, admin, tok, segdir):
    offloaded(r, admin, segdir)
    before = snapshot(r)
    for segment, status, reason in (
        ("999", 404, "no segment 999"),
        ("x", 400, "segment number"),
        ("", 400, "name a segment"),
    ):
        res = post(app, f"/admin/{P}/segment-export", {"segment": segment}, tok[P])
        assert res.status_code == status and reason in one_error(res), res.text
        assert '<table class="list segments">' in res.text
    assert snapshot(r) == before


def test_segments_of_a_sharded_project_move_or_show_the_verbs_reason(app, r, admin, tok, segdir):
    project_verbs.create(admin, SHARDED, OFFLOAD, shards=2)
    listed = offloaded(r, admin, segdir, SHARDED, [f"{url}/{n}" for url in URLS for n in range(3)])
    page = get(app, f"/admin/{SHARDED}/segments", tok["global"]).text
    for number, row in listed.items():  # as the verb names them
        assert f"<tr><td>{number}</td><td>{row['items']}</td>" in page
    try:  # whether the verb moves a sharded project's segments (a missing one: NotFound)
        segment_verbs.export_file(admin, SHARDED, segdir, "1:999999", segdir / "probe.zst")
    except BadInput as exc:  # it refuses them: the page says the same in one line
        refused = str(exc)
    except NotFound:
        refused = None
    number = min(listed)
    before = snapshot(r)
    res = post(app, f"/admin/{SHARDED}/segment-export", {"segment": number}, tok["global"])
    if refused:
        assert res.status_code == 400 and one_error(res) == refused and snapshot(r) == before
        return
    assert all(re.match(r"\d:\d+\Z", n) for n in listed)  # SHARD:NUMBER
    assert res.status_code == 200 and res.headers["content-type"] == "application/zstd"
    res = upload(app, f"/admin/{SHARDED}/segment-import", res.content, tok["global"])
    shard = number.split(":")[0]  # back on the shard it left, under a new number
    assert res.status_code == 303 and f"as+segment+{shard}%3A" in res.headers["location"]


# Block reindex


def test_block_reindex_is_a_global_form_audited_by_its_verb(app, r, admin, tok):
    limit_verbs.block(admin, "name:mallory")
    page = get(app, "/admin/-/blocks", tok["global"]).text
    assert 'action="/admin/-/blocks-reindex"' in page
    res = post(app, "/admin/-/blocks-reindex", {}, tok["global"])
    assert res.status_code == 303 and "reindexed+the+blocks+of+2+projects" in res.headers["location"]
    entry = log_verbs.audit_page(admin, None)["entries"][0]
    assert entry["action"] == "block.reindex" and entry["actor"] != "cli"
    before = snapshot(r)
    assert post(app, "/admin/-/blocks-reindex", {}, tok[P]).status_code == 403
    assert post(app, "/admin/-/blocks-reindex", {"csrf": "0" * 64}, tok["global"]).status_code == 403
    assert snapshot(r) == before


# Item lookup, scope


def test_the_item_lookup_finds_url_names_on_a_sharded_project(app, admin, engine, tok):
    project_verbs.create(admin, SHARDED, shards=3)
    item_verbs.add(admin, SHARDED, [*URLS, LONG])
    for name in (URLS[7], LONG):
        res = get(app, f"/admin/{SHARDED}/item?" + urllib.parse.urlencode({"name": name}), tok["global"])
        assert res.status_code == 200 and "<dd class=status>todo</dd>" in res.text, res.text[-2000:]
    res = get(
        app,
        f"/admin/{SHARDED}/item?" + urllib.parse.urlencode({"name": "https://example.com/never"}),
        tok["global"],
    )
    assert "found nowhere" in res.text and "never seen" in res.text


@pytest.mark.parametrize(
    "method,path,fields",
    [
        ("GET", "/filter", None),
        ("GET", "/segments", None),
        ("GET", "/item?" + urllib.parse.urlencode({"name": URLS[0]}), None),
        ("POST", "/filter", {"kind": "wide", "capacity": "100", "fp_rate": "0.01"}),
        ("POST", "/segment-export", {"segment": "1"}),
        ("POST", "/segment-import", {"file": "x"}),
    ],
)
def test_a_token_for_another_project_is_refused(app, r, admin, tok, segdir, method, path, fields):
    offloaded(r, admin, segdir)
    before = snapshot(r)
    if method == "GET":
        assert get(app, f"/admin/{P}{path}", tok[OTHER]).status_code == 403
        assert app.simulate_get(f"/admin/{P}{path}").status_code == 401
        assert get(app, f"/admin/{P}{path}", tok[P]).status_code == 200
    else:
        assert post(app, f"/admin/{P}{path}", fields, tok[OTHER]).status_code == 403
        assert post(app, f"/admin/{P}{path}", {**fields, "csrf": "0" * 64}, tok[P]).status_code == 403
    assert snapshot(r) == before


def test_a_read_only_token_reads_these_pages_and_changes_nothing(app, r, admin, tok, segdir):
    listed = offloaded(r, admin, segdir)
    watcher = tokens.create(admin.conn, P, read_only=True)[0]
    everywhere = tokens.create(admin.conn, "*", read_only=True)[0]
    for view in ("filter", "segments", "item?" + urllib.parse.urlencode({"name": URLS[0]})):
        assert get(app, f"/admin/{P}/{view}", watcher).status_code == 200, view
    before = snapshot(r)
    for action, fields in (
        ("filter", {"kind": "wide", "capacity": "100", "fp_rate": "0.01"}),
        ("segment-export", {"segment": min(listed)}),
        ("segment-import", {"file": "x"}),
    ):
        assert post(app, f"/admin/{P}/{action}", fields, watcher).status_code == 403, action
    assert post(app, "/admin/-/blocks-reindex", {}, everywhere).status_code == 403
    assert snapshot(r) == before
