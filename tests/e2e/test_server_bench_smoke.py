"""benchmarks/server_bench, cheaply: its report of the committed figures is the committed report,
its plots are written, one short wrk run against the real server, and both ways of starting it.

A whole run (`make bench`, or `--quick` for about a minute and a half) is not a test."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from server_bench.data_layer import recorded
from server_bench.items import ItemSupply
from server_bench.plan import PROJECT, RESULTS
from server_bench.plots import plot
from server_bench.report import report
from server_bench.servers import post_json, start_tracker
from server_bench.summary import carried_history, summarise
from server_bench.wrk import run_wrk
from support.paths import ROOT
from tracker_core import scripts
from tracker_core.admin import project_verbs
from tracker_core.infra.processes import alive, children_of, stop
from tracker_core.infra.rawredis import RawRedis
from tracker_core.items.engine import Engine


@pytest.fixture(scope="module")
def committed():
    return json.loads((RESULTS / "server.json").read_text())


def test_the_committed_figures_give_the_committed_report(committed):
    """Same figures in, same files out: the split into modules changed no byte of server.md."""
    assert summarise(committed) == committed["summary"]
    assert report(committed) == (RESULTS / "server.md").read_text()


def test_each_run_carries_the_earlier_runs_figures(committed):
    """server.json's history: the previous file's own history plus its headline figures, which
    the next report shows beside its own."""
    earlier = [e["date_utc"] for e in committed.get("history", [])]
    first = carried_history(committed)
    assert [e["date_utc"] for e in first] == earlier + [committed["date_utc"]]
    figures = first[-1]["figures"]
    assert (
        figures["request keep-alive req/s"]
        == committed["summary"]["request keep-alive"]["peak_requests_per_s"]
    )
    assert figures["below_saturation p99 ms"] == committed["summary"]["below_saturation"]["p99_ms"]
    later = {**committed, "date_utc": "2030-01-01T00:00:00Z", "history": first}
    assert [e["date_utc"] for e in carried_history(later)] == [
        *earlier,
        committed["date_utc"],
        "2030-01-01T00:00:00Z",
    ]
    shown = report(later)
    assert "## History" in shown and f"| {committed['date_utc']} |" in shown
    assert "| 2030-01-01T00:00:00Z (this run) |" in shown
    assert "## History" not in report({**committed, "history": []})  # nothing earlier: no section


def test_the_plots_are_written(committed, tmp_path):
    paths = plot(committed, tmp_path)
    assert sorted(p.name for p in paths) == [
        "server_irsr_rtt.png",
        "server_latency.png",
        "server_throughput.png",
    ]
    for path in paths:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.skipif(shutil.which("wrk") is None, reason="wrk is not installed (make deps)")
def test_one_short_wrk_run_against_the_tracker(redis_url, admin, tmp_path):
    project_verbs.create(admin, PROJECT)
    supply = ItemSupply(admin, Engine(redis_url))
    supply.top_up(20_000)
    process, port = start_tracker(redis_url, tmp_path / "servers.log")
    workers = children_of(process.pid)
    try:
        url = f"http://127.0.0.1:{port}/{PROJECT}/request"
        status, body = post_json(url, {"downloader": "probe", "api_version": "2"})
        assert status == 200 and b"item_name" in body
        figures = run_wrk(url, "request.lua", 2, 1, False)
        assert figures["requests"] > 0 and figures["non_2xx"] == 0
        assert figures["latency_ms"]["p99"] >= figures["latency_ms"]["p50"] > 0
    finally:
        assert stop(process) == 0
    assert workers and not any(alive(p) for p in workers)


@pytest.mark.parametrize(
    "argv,env",
    [
        ([sys.executable, "benchmarks/server_bench", "--help"], {}),
        ([sys.executable, "-m", "server_bench", "--help"], {"PYTHONPATH": "benchmarks"}),  # make bench
    ],
    ids=["directory", "module"],
)
def test_the_command_line_starts_both_ways(argv, env):
    if "PYTHONPATH" in env and os.environ.get("PYTHONPATH"):
        env = {"PYTHONPATH": env["PYTHONPATH"] + os.pathsep + os.environ["PYTHONPATH"]}
    done = subprocess.run(
        argv, cwd=ROOT, env=dict(os.environ, **env), capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: server_bench")
    assert "--quick" in done.stdout and "--out" in done.stdout


def test_the_data_layer_records_the_commands_the_engine_sends_and_redis_runs_them(redis_url, admin):
    # The engine sends claims as packed RESP bytes on its RawRedis: recorded() must still get the
    # EVALSHA as arguments (a full `--part server` run once stopped here), and running the
    # recorded command must claim exactly as the engine would.
    project_verbs.create(admin, PROJECT)
    supply = ItemSupply(admin, Engine(redis_url))
    supply.top_up(10)
    engine = Engine(redis_url)
    engine.claim(PROJECT, "warm-up", "127.0.0.1", 1)  # the script loaded, settings cached
    command = recorded(engine, lambda: engine.claim(PROJECT, "recorder", "127.0.0.1", 2))
    assert command[0] == b"EVALSHA"
    assert supply.todo() == 9  # recording claimed nothing
    reply = RawRedis(redis_url).pipeline([command])[0]
    assert reply[0] == 200 and len(reply) == 4 and supply.todo() == 7
    assert engine.claim(PROJECT, "after", "127.0.0.1", 1)[0] == 200 and supply.todo() == 6
    _, names = engine.claim(PROJECT, "finisher", "127.0.0.1", 1)
    done = recorded(
        engine,
        lambda: engine.done(PROJECT, "finisher", "1", names, ["data", 5], '{"sha1": "x"}'),
    )
    assert done[0] == b"EVALSHA" and admin.conn.scard(admin.keys(PROJECT).done) == 0
    conn = RawRedis(redis_url)
    conn.execute_command("SCRIPT", "LOAD", scripts.SCRIPTS["done"].source)  # as the data layer does
    reply = conn.pipeline([done])[0]
    assert reply[0] == 200 and reply[2] == 1 and admin.conn.sismember(admin.keys(PROJECT).done, names[0])
