"""The capacity part of benchmarks/server_bench: the constant-rate client counts latency from each
request's due time (coordinated omission corrected), the sweep's bookkeeping, granian serving the
same tracker app, and the committed capacity.md is what the committed capacity.json gives.

A whole run (`python -m server_bench --part capacity`, ~6 minutes) is not a test."""

from __future__ import annotations

import argparse
import json
import socket
import sys
import threading
import time

import pytest

from server_bench import capacity, cli, constant_rate
from server_bench.capacity_report import report
from server_bench.plan import CAPACITY_FULL, LATENCY_CONNECTIONS, PROJECT, RESULTS, CapacityPlan
from server_bench.servers import post_json, start_granian, start_hello
from server_bench.worker_counts import ProcessTreeCpu, best_count, cell_order, medians
from tracker_core.admin import item_verbs, project_verbs
from tracker_core.infra.processes import stop

BODY = b'{"downloader":"tester","api_version":"2"}'


def test_a_response_is_complete_only_with_its_whole_body():
    whole = bytearray(b"HTTP/1.1 200 OK\r\nContent-Type: a/b\r\ncontent-length: 5\r\n\r\nhello")
    for cut in range(len(whole)):
        assert constant_rate.response_end(whole[:cut]) is None
    assert constant_rate.response_end(whole) == (len(whole), 200)
    two = whole.replace(b"200 OK", b"404 Not Found") + whole  # pipelined: the first one only
    assert constant_rate.response_end(two) == (len(whole) + 7, 404)
    with pytest.raises(RuntimeError, match="Content-Length"):
        constant_rate.response_end(bytearray(b"HTTP/1.1 200 OK\r\nX: y\r\n\r\n"))


def test_the_length_is_read_from_the_head_only_whatever_its_spelling():
    body = b"x\r\nContent-Length: 9\r\n\r\nyyyyyy"  # 30 bytes that look like a head
    for spelling in (b"Content-Length", b"content-length", b"CONTENT-LENGTH"):
        whole = bytearray(b"HTTP/1.1 200 OK\r\n" + spelling + b": 30\r\nX: y\r\n\r\n" + body)
        assert len(body) == 30
        assert constant_rate.response_end(whole) == (len(whole), 200)
        assert constant_rate.response_end(whole[:-1]) is None


class StallingServer:
    """Answers one request at a time, at once, except that it stalls STALL_S before answering
    request number STALL_AT: the way a server pauses (a GC, a fork, a busy core)."""

    def __init__(self, stall_at: int, stall_s: float):
        self.stall_at, self.stall_s, self.answered = stall_at, stall_s, 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        conn, _ = self.listener.accept()
        buffer = b""
        while True:
            data = conn.recv(65536)
            if not data:
                return
            buffer += data
            while b"\r\n\r\n" in buffer:
                head, _, rest = buffer.partition(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
                if len(rest) < length:
                    break
                buffer = rest[length:]
                self.answered += 1
                if self.answered == self.stall_at:
                    time.sleep(self.stall_s)
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")


def test_a_stall_counts_for_every_request_due_during_it():
    """Over one connection (as a closed-loop client would be stuck), a 300 ms stall delays the
    60 requests due meanwhile: from their due time they are late; from when they went out only
    the stalled one is. A client that measured from the send would report a clean p90."""
    server = StallingServer(stall_at=50, stall_s=0.3)
    request = constant_rate.request_bytes("127.0.0.1", server.port, "/p/request", BODY, {})
    figures = constant_rate.run("127.0.0.1", server.port, [request], 200, 2.0, connections=1)
    assert figures["requests"] == 400 and figures["non_2xx"] == 0
    assert figures["errors"] == {"reset": 0, "timeout": 0}
    # About 60 of the 400 (15%) were due during the stall: p90 from the due time sees it.
    assert figures["latency_ms"]["p90"] > 30
    assert figures["latency_ms"]["max"] >= 290
    assert figures["latency_from_send_ms"]["p90"] < 30
    assert figures["latency_from_send_ms"]["max"] >= 290  # the stalled request itself
    # Those due while its one connection waited (more when the machine is busy), and each
    # waited in the client: the wait is in their latency.
    assert figures["queued_for_a_connection"] >= 40
    assert figures["queued_wait_ms"]["max"] >= 250


def test_the_client_holds_its_rate_against_the_hello_world_app(tmp_path):
    process, port = start_hello(tmp_path / "hello.log", 1)
    try:
        requests = [
            constant_rate.request_bytes("127.0.0.1", port, f"/{PROJECT}/request", BODY, {}) for _ in range(3)
        ]
        figures = constant_rate.run("127.0.0.1", port, requests, 400, 1.5, connections=8)
    finally:
        stop(process)
    assert figures["requests"] == 600 and figures["non_2xx"] == 0
    assert 360 <= figures["requests_per_s"] <= 440  # the schedule, not the server, sets the rate
    latency = figures["latency_ms"]
    assert 0 < latency["p50"] <= latency["p90"] <= latency["p99"] <= latency["p999"] <= latency["max"]
    assert figures["client_cpu_us_per_request"] > 0


def test_granian_serves_the_same_tracker_app(redis_url, admin, tmp_path):
    project_verbs.create(admin, PROJECT)
    item_verbs.add(admin, PROJECT, ["https://example.com/a b?c=1%20#frag", "plain"])
    process, port = start_granian("tracker", tmp_path / "granian.log", 2, {"TRACKER_REDIS_URL": redis_url})
    try:
        tree = ProcessTreeCpu(process.pid)
        status, body = post_json(
            f"http://127.0.0.1:{port}/{PROJECT}/request", {"downloader": "tester", "api_version": "2"}
        )
        assert status == 200
        assert json.loads(body)["item_name"] in ("https://example.com/a b?c=1%20#frag", "plain")
        assert len(tree.pids) >= 3  # granian's parent and its two workers, all measured
    finally:
        stop(process)


def test_each_round_visits_the_cells_in_another_order():
    plan = CapacityPlan(
        counts=(1, 2, 4), rounds=3, seconds=1, warmup_s=1, connections=8, latency_s=1, latency_runs=1
    )
    first, second = cell_order(plan, ("bjoern", "granian"), 0), cell_order(plan, ("bjoern", "granian"), 1)
    assert first[:2] == [("bjoern", 1), ("granian", 1)]
    assert second[:2] == [("granian", 2), ("bjoern", 2)]
    assert sorted(first) == sorted(second)  # every cell, once a round
    assert set(CAPACITY_FULL.counts) == {1, 2, 3, 4, 6, 8}


def _run(server, workers, rate, round_number=0):
    return {
        "round": round_number,
        "server": server,
        "workers": workers,
        "requests_per_s": rate,
        "latency_ms": {"p50": 1.0, "p99": 2.0},
        "non_2xx": 0,
        "server_cpu_us_per_request": 100.0,
        "redis_cpu_us_per_request": 80.0,
    }


def test_medians_over_rounds_and_the_fewest_workers_near_the_best():
    runs = [_run("bjoern", 2, r, n) for n, r in enumerate((5000, 9000, 5200))]
    runs += [_run("bjoern", 4, r, n) for n, r in enumerate((6000, 6100, 1000))]
    runs += [_run("bjoern", 8, r, n) for n, r in enumerate((6150, 6150, 6150))]
    table = medians(runs)
    assert [(r["workers"], r["requests_per_s"]) for r in table] == [(2, 5200), (4, 6000), (8, 6150)]
    assert table[0]["requests_per_s_min"] == 5000 and table[0]["requests_per_s_max"] == 9000
    # 4 workers are within 3% of 8's rate: fewer processes win.
    assert best_count(table, "bjoern") == {"workers": 4, "requests_per_s": 6000, "best_requests_per_s": 6150}


def test_the_committed_figures_give_the_committed_report():
    committed = json.loads((RESULTS / "capacity.json").read_text())
    assert report(committed) == (RESULTS / "capacity.md").read_text()


def test_the_timeline_holds_each_answer_with_its_due_send_and_answer_times(tmp_path):
    process, port = start_hello(tmp_path / "hello.log", 1)
    try:
        request = constant_rate.request_bytes("127.0.0.1", port, f"/{PROJECT}/request", BODY, {})
        plain = constant_rate.run("127.0.0.1", port, [request], 200, 0.5, connections=4)
        figures = constant_rate.run("127.0.0.1", port, [request], 200, 0.5, connections=4, timeline=True)
    finally:
        stop(process)
    assert "timeline" not in plain  # only when asked: 100k tuples a run otherwise
    assert len(figures["timeline"]) == figures["requests"] == 100
    ports = set()
    for due_ns, sent_ns, answered_ns, local_port in figures["timeline"]:
        assert 0 <= due_ns <= sent_ns < answered_ns
        ports.add(local_port)
    assert len(ports) <= 4 and min(ports) > 0  # the connection each went out on
    dues = sorted(entry[0] for entry in figures["timeline"])
    assert dues[1] - dues[0] == pytest.approx(5e6, abs=1)  # every 5 ms at 200/s


def _latency_run(workers, share, p99, p50=1.0, rate=1000.0):
    return {
        "workers": workers,
        "share_offered": share,
        "latency_ms": {"p50": p50, "p99": p99},
        "requests_per_s": rate,
        "server_cpu_us_per_request": 100.0,
        "redis_cpu_us_per_request": 80.0,
        "client_cpu_us_per_request": 20.0 * workers,
    }


def test_the_p99_part_prints_the_median_run_per_worker_count_and_share():
    runs = [_latency_run(4, 0.7, p99) for p99 in (9.0, 3.0, 40.0)] + [_latency_run(2, 0.7, 2.5)]
    runs.append(_latency_run(4, 0.3, 1.25))
    assert capacity.p99_table(runs)[1:] == [
        "2 | 70% | 1 | 2.50 | 2.50 | 1.00 | 1,000 | 0.22",
        "4 | 30% | 1 | 1.25 | 1.25 | 1.00 | 1,000 | 0.26",
        "4 | 70% | 3 | 9.00 | 9.00, 3.00, 40.00 | 1.00 | 1,000 | 0.26",
    ]


def test_the_p99_part_takes_worker_counts_from_1_and_shares_up_to_the_whole_peak():
    assert cli._counts("1") == [1] and cli._counts("2,3,4") == [2, 3, 4]
    with pytest.raises(argparse.ArgumentTypeError):
        cli._counts("0,2")
    assert cli._shares("1") == [1.0] and cli._shares("0.7,0.5") == [0.7, 0.5]
    for refused in ("0", "1.01", "0.7,-0.1"):
        with pytest.raises(argparse.ArgumentTypeError):
            cli._shares(refused)


def test_the_p99_part_runs_only_the_constant_rate_runs(monkeypatch, capsys):
    calls = []

    def run_p99(counts, shares, seconds, rounds, aof):
        calls.append((counts, shares, seconds, rounds, aof))
        return [_latency_run(counts[0], shares[0], 4.0)]

    monkeypatch.setattr(capacity, "run_p99", run_p99)
    monkeypatch.setattr(capacity, "run_capacity", lambda *a: pytest.fail("the sweep ran"))
    argv = ["server_bench", "--part", "p99", "--workers", "3", "--shares", "0.7", "--seconds", "5"]
    monkeypatch.setattr(sys, "argv", argv)
    cli.main()
    assert calls == [([3], [0.7], 5.0, 1, True)]
    assert "3 | 70% | 1 | 4.00 | 4.00" in capsys.readouterr().out
    monkeypatch.setattr(sys, "argv", [*argv, "--no-aof"])
    cli.main()
    assert calls[-1] == ([3], [0.7], 5.0, 1, False)


def test_cores_busy_is_the_rate_times_every_processs_cpu_per_request():
    from server_bench.capacity_report import cores_busy

    run = {
        "requests_per_s": 5000.0,
        "server_cpu_us_per_request": 100.0,
        "redis_cpu_us_per_request": 80.0,
        "client_cpu_us_per_request": 20.0,
    }
    assert cores_busy(run) == pytest.approx(1.0)
    assert cores_busy(run | {"client_cpu_us_per_request": None}) is None  # no answer, no figure
    assert cores_busy(run | {"requests_per_s": None}) is None


def test_the_run_table_shows_the_redis_forks_and_the_load_of_each_run():
    committed = json.loads((RESULTS / "capacity.json").read_text())
    run = committed["latency_runs"][0] | {
        "redis_forks": 1,
        "load_average": 1.23,
        "connections_per_worker": [51, 9, 4],
    }
    committed["latency_runs"] = [run]
    row = next(line for line in report(committed).splitlines() if line.startswith("| 0 | 70% |"))
    assert row.endswith(" | 1 | 1.23 | 51/9/4 |")
    del run["redis_forks"], run["load_average"], run["connections_per_worker"]  # older runs
    row = next(line for line in report(committed).splitlines() if line.startswith("| 0 | 70% |"))
    assert row.endswith(" | - | - | - |")


def test_the_p99_part_runs_against_a_real_tracker_and_records_forks_and_load():
    runs = capacity.run_p99([1], [0.3], 1.0, 1)
    assert len(runs) == 1
    run = runs[0]
    assert run["workers"] == 1 and run["share_offered"] == 0.3 and run["round"] == 0
    assert run["requests"] > 0 and run["non_2xx"] == 0
    assert isinstance(run["redis_forks"], int) and run["redis_forks"] >= 0
    assert run["load_average"] >= 0
    assert 0 <= run["cpu_steal_share"] < 1
    assert run["target_per_s"] == pytest.approx(0.3 * run["peak_requests_per_s"], rel=0.01)
    assert run["connections_per_worker"] == [LATENCY_CONNECTIONS]  # one worker holds them all


def test_the_p99_part_without_aof_runs_a_redis_that_never_forks(monkeypatch):
    # With the AOF on, each run compacts it after its top-up (a fork); without, nothing to compact.
    monkeypatch.setattr(capacity, "compact_aof", lambda conn: pytest.fail("an AOF was compacted"))
    runs = capacity.run_p99([1], [0.3], 1.0, 1, aof=False)
    assert len(runs) == 1 and runs[0]["requests"] > 0 and runs[0]["non_2xx"] == 0
    assert runs[0]["redis_forks"] == 0


def test_connections_per_process_counts_what_each_worker_accepted(tmp_path):
    process, port = start_hello(tmp_path / "hello.log", 2)
    try:
        request = constant_rate.request_bytes("127.0.0.1", port, f"/{PROJECT}/request", BODY, {})
        figures = constant_rate.run(
            "127.0.0.1",
            port,
            [request],
            100,
            0.2,
            connections=12,
            connected=capacity.connections_per_process(port),
        )
        held = figures["connected"]
        assert sum(held) == 12 and 1 <= len(held) <= 2 and held == sorted(held, reverse=True)
        # Ports no worker holds (never connected): counted as held by none, after the wait.
        assert capacity.connections_per_process(port, wait_s=0.05)([1, 2]) == [0]
    finally:
        stop(process)


def test_steal_share_is_the_stolen_part_of_the_ticks_between_two_readings():
    total, stolen = capacity.cpu_ticks()
    assert total > 0 and 0 <= stolen <= total
    assert capacity.steal_share((1000, 10), (2000, 60)) == 0.05
    assert capacity.steal_share((1000, 10), (1000, 10)) == 0.0  # no ticks between: none stolen
