"""clear_queue-2.lua: a queue is dropped whole, and its size answered."""

from tracker_core import scripts
from tracker_core.keyspace import ProjectKeys


def test_clear_queue_drops_every_item(conn, project, r, names):
    r.sadd(project.backfeed, *names)
    assert scripts.clear_queue(conn, project, queue=project.backfeed) == len(names)
    assert not r.exists(project.backfeed)


def test_clear_queue_of_an_unknown_project_keeps_it(conn, r, names):
    k = ProjectKeys("nowhere")
    r.sadd(k.todo, *names)
    assert scripts.clear_queue(conn, k, queue=k.todo) == scripts.clear_queue.codes.UNKNOWN_PROJECT
    assert r.scard(k.todo) == len(names)
