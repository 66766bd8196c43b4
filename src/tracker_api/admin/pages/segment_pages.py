"""/admin/P/segments: the offloaded segments listed, one exported as a download, a file imported
from an upload; through tracker_core.admin.segment_verbs, as `tracker segments` does.

An export takes the segment's items out of the project (the verb's ticket lets the file come back
once); the page writes it to a private temporary folder, sends it and keeps no copy. An import's
upload is the form's body, at most forms.MAX_UPLOAD_BYTES; before the verb reads it, the file is
checked to be zstandard that decompresses to at most MAX_SEGMENT_TEXT_BYTES (a small file that
unpacks to gigabytes would otherwise fill the worker's memory). What the verb refuses (a sharded
project where segments cannot move yet, an unknown segment, a queue) is the form's one-line 4xx.
"""

from __future__ import annotations

import io
import re
import tempfile
from pathlib import Path

import falcon
import zstandard

from tracker_api.admin.api_request import MAX_UPLOAD_BYTES
from tracker_api.admin.pages.base import Pages
from tracker_core.admin import segment_verbs
from tracker_core.admin.context import AdminContext
from tracker_core.admin.errors import BadInput
from tracker_core.offload import segment_registry

# What an uploaded segment may unpack to: 50,000 items (offload_segment_items' default) of
# 4,096-byte names, with room to spare. Larger files: `tracker segments import` on the host.
MAX_SEGMENT_TEXT_BYTES = 256 << 20
DIGITS_RE = re.compile(r"[0-9]{1,18}\Z")
READ_CHUNK = 1 << 20


class Download:
    """An action's answer that is a file to save (FILE: open for reading, at its start)."""

    def __init__(self, filename: str, file, length: int):
        self.filename, self.file, self.length = filename, file, length

    def send(self, resp) -> None:
        resp.status = falcon.HTTP_200
        resp.content_type = "application/zstd"
        resp.downloadable_as = self.filename
        resp.set_stream(self.file, self.length)


def checked_segment(data: bytes) -> None:
    """Refuse DATA (BadInput) unless it is a zstandard frame of at most MAX_SEGMENT_TEXT_BYTES,
    whole: read in bounded steps, never unpacked past the bound."""
    if not data:
        raise BadInput("choose a segment file to import")
    try:
        size = zstandard.get_frame_parameters(data).content_size
    except zstandard.ZstdError:
        size = zstandard.CONTENTSIZE_UNKNOWN  # a skippable frame first: the reader finds out
    limit = f"a segment file may unpack to {MAX_SEGMENT_TEXT_BYTES} bytes here: import it with `tracker segments import`"
    if (
        size not in (zstandard.CONTENTSIZE_UNKNOWN, zstandard.CONTENTSIZE_ERROR)
        and size > MAX_SEGMENT_TEXT_BYTES
    ):
        raise BadInput(limit)
    read = 0
    try:
        reader = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data))
        while chunk := reader.read(READ_CHUNK):
            read += len(chunk)
            if read > MAX_SEGMENT_TEXT_BYTES:
                raise BadInput(limit)
    except zstandard.ZstdError as exc:
        raise BadInput(f"not a segment file (zstandard): {str(exc)[:120]}") from None
    if size not in (zstandard.CONTENTSIZE_UNKNOWN, zstandard.CONTENTSIZE_ERROR) and read != size:
        raise BadInput(f"the segment file is cut short ({read} of {size} bytes unpack)")


def segment_name(text: str):
    """A segment as the form names it: a number on a one-shard project, else the text as given
    ("SHARD:NUMBER" on a sharded one), which the verb checks."""
    return int(text) if DIGITS_RE.match(text) else text


class SegmentPages:
    """ProjectPages' segments view and its two actions."""

    admin: AdminContext
    pages: Pages

    def _segments(self, req, project):
        return {
            "segments": segment_verbs.list_segments(self.admin, project),
            "import_queues": segment_registry.QUEUES,
            "max_upload_mib": MAX_UPLOAD_BYTES >> 20,
        }

    def _do_segment_export(self, ctx, project, form):
        """The segment as a download; its items leave the project (audited by the verb)."""
        text = form.text("segment")
        if not text:
            raise BadInput("name a segment to export")
        filename = f"{project}-segment-{text.replace(':', '-')}.zst"
        with tempfile.TemporaryDirectory(prefix="tracker-admin-export-") as folder:
            destination = Path(folder) / "segment.zst"
            segment_verbs.export_file(ctx, project, self.pages.segments_dir, segment_name(text), destination)
            # Open before the folder goes: the open file stays readable until it is sent.
            file = open(destination, "rb")  # noqa: SIM115 (closed by the WSGI server after sending)
            length = destination.stat().st_size
        return Download(filename, file, length)

    def _do_segment_import(self, ctx, project, form):
        data = form.get("file", "").encode("utf-8", "surrogateescape")  # the upload's bytes, as sent
        checked_segment(data)
        queue = form.text("queue") or "todo"
        with tempfile.TemporaryDirectory(prefix="tracker-admin-import-") as folder:
            source = Path(folder) / "uploaded.zst"
            source.write_bytes(data)
            done = segment_verbs.import_file(ctx, project, self.pages.segments_dir, source, queue)
        refused = done.get("refused_not_utf8")
        tail = f"; refused: {refused} not valid UTF-8" if refused else ""
        if done["segment"] is not None:
            return f"imported {done['items']} items as segment {done['segment']}{tail}"
        return (
            f"imported {done['items']} items into {queue} through the Bloom filter "
            f"({done['duplicates']} duplicates dropped){tail}"
        )
