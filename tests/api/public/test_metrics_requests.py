"""Per-route request counts and durations: labelled by route template (bounded, whatever paths
are sent), and summed over every bjoern worker, dead ones included."""

from __future__ import annotations

import http.client
import os
import signal
import subprocess
import tempfile

import pytest
from falcon import testing
from prometheus_client.parser import text_string_to_metric_families

from support.processes import start_serve, stop, wait_for, wait_for_port, worker_pids
from tracker_api.app import create_app
from tracker_api.public import request_metrics
from tracker_core.admin import item_verbs, project_verbs

P = "req-metrics"


def samples(text: str, name: str) -> dict[tuple, float]:
    """{sorted label pairs: value} of sample NAME."""
    return {
        tuple(sorted(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name
    }


def count(text: str, route: str, method: str, status: str) -> float:
    key = (("method", method), ("route", route), ("status", status))
    return samples(text, "tracker_http_requests_total").get(key, 0)


def test_requests_are_counted_by_route_template_method_and_status(engine, admin):
    project_verbs.create(admin, P)
    item_verbs.add(admin, P, [f"https://example.com/x y/{n}?a=%2F#f" for n in range(10)])
    web = testing.TestClient(create_app(engine))
    body = {"downloader": "alice", "api_version": "2"}
    for _ in range(3):
        assert web.simulate_post(f"/{P}/request", json=body).status_code == 200
    assert web.simulate_post(f"/{P}/multi=2/request", json=body).status_code == 200
    assert web.simulate_post(f"/{P}/request", json={"downloader": "x"}).status_code == 400
    assert web.simulate_get("/no/such/path/here").status_code == 404
    text = web.simulate_get("/metrics").text
    assert count(text, "/{project}/request", "POST", "200") == 3
    assert count(text, "/{project}/multi={multi:int}/request", "POST", "200") == 1
    assert count(text, "/{project}/request", "POST", "400") == 1
    assert count(text, "unrouted", "GET", "404") == 1
    durations = samples(text, "tracker_http_request_duration_seconds_count")
    assert durations[(("method", "POST"), ("route", "/{project}/request"))] == 4
    sums = samples(text, "tracker_http_request_duration_seconds_sum")
    assert 0 < sums[(("method", "POST"), ("route", "/{project}/request"))] < 10
    # Each scrape adds only what came since the last one.
    assert web.simulate_post(f"/{P}/request", json=body).status_code == 200
    text = web.simulate_get("/metrics").text
    assert count(text, "/{project}/request", "POST", "200") == 4
    assert count(text, "/metrics", "GET", "200") == 1
    assert (
        samples(text, "tracker_http_request_duration_seconds_count")[
            (("method", "POST"), ("route", "/{project}/request"))
        ]
        == 5
    )
    # No project name or item reaches a label: only templates.
    assert P not in "".join(line for line in text.splitlines() if line.startswith("tracker_http_"))


@pytest.mark.filterwarnings("ignore::wsgiref.validate.WSGIWarning")  # the odd methods, on purpose
def test_a_thousand_unknown_paths_and_odd_methods_add_no_series(engine):
    web = testing.TestClient(create_app(engine))
    for n in range(1000):
        web.simulate_get(f"/scan/{n}/wp-admin.php/{'%2F' * (n % 7)}x y")
    for method in ("PROPFIND", "BREW", "M-SEARCH"):
        web.simulate_request(method, "/metrics")
    text = web.simulate_get("/metrics").text
    series = samples(text, "tracker_http_requests_total")
    assert count(text, "unrouted", "GET", "404") == 1000
    # Methods outside HTTP's share one label (Falcon answers 405 or 400 to them).
    odd = {k: v for k, v in series.items() if ("method", "other") in k}
    assert sum(odd.values()) == 3 and len(odd) <= 2
    assert len(series) <= 3, series
    assert len(samples(text, "tracker_http_request_duration_seconds_count")) <= 3


def test_prepare_makes_a_directory_per_run_removes_orphans_and_cleans_a_given_one(tmp_path, monkeypatch):
    monkeypatch.delenv(request_metrics.MULTIPROC_ENV, raising=False)
    # A server killed -9 could not remove its directory: the next start does.
    orphan = subprocess.Popen(["true"])
    orphan.wait()
    left = tempfile.mkdtemp(prefix=f"tracker-metrics-{orphan.pid}-")
    made, cleanup = request_metrics.prepare_multiprocess_directory()
    assert os.path.isdir(made) and os.environ[request_metrics.MULTIPROC_ENV] == made
    assert os.path.basename(made).startswith(f"tracker-metrics-{os.getpid()}-")
    assert not os.path.exists(left)
    cleanup()
    assert not os.path.exists(made) and request_metrics.MULTIPROC_ENV not in os.environ

    (tmp_path / "counter_12345.db").write_bytes(b"an earlier run")
    (tmp_path / "keep.txt").write_text("not ours")
    monkeypatch.setenv(request_metrics.MULTIPROC_ENV, str(tmp_path))
    given, cleanup = request_metrics.prepare_multiprocess_directory()
    cleanup()
    assert given == str(tmp_path) and sorted(p.name for p in tmp_path.iterdir()) == ["keep.txt"]


def get(port: int, path: str) -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", path)
        res = conn.getresponse()
        return res.status, res.read().decode()
    finally:
        conn.close()


def test_every_workers_requests_are_summed_and_outlive_the_worker(redis_url, tmp_path):
    directory = tmp_path / "metrics"
    directory.mkdir()
    (directory / "counter_1.db").write_bytes(b"\0" * 16)  # an earlier run's file: removed at start
    env = dict(os.environ, **{request_metrics.MULTIPROC_ENV: str(directory)})
    process, port = start_serve(redis_url, workers=2, env=env)
    try:
        assert wait_for(lambda: len(worker_pids(process.pid)) >= 2, 10)
        for n in range(40):  # a connection each: the workers share the accepting socket
            assert get(port, f"/nope{n}/stats.json")[0] == 404
        # The scraped worker flushes as it answers; the other within its flush interval.
        assert wait_for(
            lambda: count(get(port, "/metrics")[1], "/{project}/stats.json", "GET", "404") == 40, 5
        )
        assert not (directory / "counter_1.db").exists()

        # Both workers die; their replacements answer with every count flushed before still there
        # (what a worker counted after its last flush, here the scrapes, dies with it).
        workers = worker_pids(process.pid)
        for pid in workers:
            os.kill(pid, signal.SIGKILL)
        assert wait_for(lambda: set(worker_pids(process.pid)).isdisjoint(workers), 10)
        assert wait_for(lambda: len(worker_pids(process.pid)) >= 2, 10)
        wait_for_port(port, process)
        text = get(port, "/metrics")[1]
        assert count(text, "/{project}/stats.json", "GET", "404") == 40
    finally:
        stop(process)
