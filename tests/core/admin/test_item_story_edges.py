"""The admin's item story at its edges: a segment refilled while its files are searched, own
queues past the public answer's cap, and a log page filtered by item that stays bounded."""

from pathlib import Path

import pytest

from support.projects import new_project
from tracker_core.admin import item_story, item_verbs, project_verbs
from tracker_core.donelog import log_archive, log_reader
from tracker_core.items import item_status
from tracker_core.keyspace import ProjectKeys
from tracker_core.maintainer import maintenance
from tracker_core.offload import staging
from tracker_core.offload.lease import Lease

P = "edge"
K = ProjectKeys(P)
URL = "https://example.org/a b/?q=%2F&r=1+1#x"


@pytest.fixture
def project(admin):
    return new_project(admin, P, settings={"log_maxlen": "0"})


def test_a_segment_refilled_while_the_files_are_searched_is_answered_from_its_queue(
    project, admin, r, tmp_path, monkeypatch
):
    names = [f"{URL}&n={i}" for i in range(20)]
    item_verbs.add(admin, P, names, queue="backfeed")
    project_verbs.set_settings(
        admin, P, {"offload_high": "10", "offload_low": "5", "offload_segment_items": "5"}
    )
    assert maintenance.maintain_project(r, P, tmp_path)["offloaded"] == 10
    on_disk = sorted(set(names) - r.smembers(K.backfeed))
    reads = []
    real_read = item_story.read_names
    lease = Lease(r, K, "node-b")

    def refill_first(path: Path) -> bytes:
        if not reads:  # a maintainer refills every segment just as the search begins
            assert lease.take()
            while staging.refill_one(r, K, tmp_path, lease, queue="backfeed") >= 0:
                pass
        reads.append(path)
        return real_read(path)

    monkeypatch.setattr(item_story, "read_names", refill_first)
    (told,) = item_verbs.story(admin, P, tmp_path, [on_disk[0]])
    assert (told["status"], told["queue"], told["segment"]) == ("todo", "backfeed", None)
    assert reads  # the search did start, and saw the registry change under it


def test_admins_look_in_every_own_queue_past_the_public_cap(project, admin, r, tmp_path, monkeypatch):
    monkeypatch.setattr(item_status, "OWN_QUEUES_CHECKED", 3)
    for i in range(6):
        item_verbs.add(admin, P, [f"{URL}&own={i}"], queue=f"downloader:owner{i}")
    public = item_verbs.status(admin, P, [f"{URL}&own={i}" for i in range(6)])  # 3 queues looked in
    unseen = [i for i, answer in enumerate(public) if answer["status"] is None]
    assert len(unseen) == 3 and all(public[i]["maybe"] == ["downloader_queue"] for i in unseen)
    told = item_verbs.story(admin, P, tmp_path, [f"{URL}&own={i}" for i in unseen] + ["never"])
    assert [(t["status"], t["queue"], t["maybe"]) for t in told[:3]] == [
        ("todo", f"downloader:owner{i}", []) for i in unseen
    ]
    assert (told[3]["status"], told[3]["maybe"], told[3]["seen"]) == (None, [], False)


def test_an_item_filtered_log_page_is_bounded_and_goes_on_from_its_cursor(
    project, admin, engine, r, tmp_path
):
    lease = Lease(r, K, "node-a")
    assert lease.take()
    for n in range(30):  # three archived files of ten one-item entries, then the item in the stream
        item_verbs.add(admin, P, [f"{URL}&n={n}"])
        _, claimed = engine.claim(P, "alice", "10.0.0.1", 1)
        engine.done(P, "alice", "1", claimed, ["example.org", 10], "id")
        if n % 10 == 9:
            assert log_archive.archive(r, K, tmp_path, lease, keep=0) == 10
    item_verbs.add(admin, P, [URL])
    _, claimed = engine.claim(P, "bob", "10.0.0.2", 1)
    engine.done(P, "bob", "1", claimed, ["example.org", 10], "id")
    # Each file passed over counts a tenth of its ten entries: a budget of one entry per page.
    pages, cursor, found = 0, None, []
    while True:
        page = log_reader.page(r, K, tmp_path, item=URL, cursor=cursor, max_scan=1)
        pages += 1
        found += page["entries"]
        cursor = page["cursor"]
        if cursor is None:
            break
    assert [e["downloader"] for e in found] == ["bob"] and found[0]["items"] == [URL]
    assert pages == 5  # three files one by one, the stream's entry, then an empty last page
    assert log_reader.page(r, K, tmp_path, item=URL)["entries"] == found


def test_a_story_with_a_budget_says_what_it_left_unread(project, admin, engine, r, tmp_path):
    """The admin API and pages read for STORY_BUDGET_S at most (a worker serving warriors waits
    meanwhile): what was left is named in "unread", and "maybe" stays; the CLI reads it all."""
    names = [f"{URL}&n={i}" for i in range(20)]
    item_verbs.add(admin, P, names, queue="backfeed")
    project_verbs.set_settings(
        admin, P, {"offload_high": "10", "offload_low": "5", "offload_segment_items": "5"}
    )
    assert maintenance.maintain_project(r, P, tmp_path)["offloaded"] == 10
    for n in range(3):  # done-log entries in Redis
        item_verbs.add(admin, P, [f"{URL}&done={n}"])
        _, claimed = engine.claim(P, "alice", "10.0.0.1", 1)
        engine.done(P, "alice", "1", claimed, ["example.org", 10], "id")
    on_disk = sorted(set(names) - r.smembers(K.backfeed))[-1]
    (hurried,) = item_verbs.story(admin, P, tmp_path, [on_disk], budget_s=0)
    assert (hurried["status"], hurried["maybe"]) == (None, ["offloaded"])
    assert [line.split(" (")[0] for line in hurried["unread"]] == [
        f"the done log after entry {r.xrange(K.log, count=1)[0][0]}",
        "2 of 2 segment files not searched",
    ]
    (told,) = item_verbs.story(admin, P, tmp_path, [on_disk])
    assert (told["status"], told["queue"], told["maybe"], told["unread"]) == ("offloaded", "backfeed", [], [])
