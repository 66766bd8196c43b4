"""A warrior's two calls over real HTTP, for tests that watch a page while items get done."""

from __future__ import annotations

import json
import urllib.request


def post_json(base: str, path: str, body: dict) -> tuple[int, str]:
    request = urllib.request.Request(
        base + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=10) as res:
        return res.status, res.read().decode()


def complete_over_http(
    base: str, project: str, downloader: str, n: int, nbytes: int, version: str = "1"
) -> list[str]:
    """Claim N items of PROJECT as DOWNLOADER and report them done with NBYTES in all."""
    status, body = post_json(
        base,
        f"/{project}/multi={n}/request",
        {"downloader": downloader, "api_version": "2", "version": version},
    )
    assert status == 200
    items = json.loads(body)["item_name"].split("\0")
    done = {
        "downloader": downloader,
        "version": version,
        "item": "\0".join(items),
        "bytes": {"data": nbytes},
        "id": {},
    }
    assert post_json(base, f"/{project}/done", done) == (200, "OK")
    return items
