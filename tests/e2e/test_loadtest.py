"""Locust warriors against the real server: the figures operators watch, every item accounted for.

Locust runs in subprocesses (loadtest.runner) so gevent's monkey-patching never reaches pytest.
"""

import json
import random
import re
import subprocess
import sys
import urllib.request

import pytest
from loadtest import figures, options

from support.locust_runs import seeded_run
from support.paths import ROOT
from support.processes import free_port, start_demo, stop, wait_for
from tracker_core.admin import census_verbs, project_verbs

SEEDED = 3000


def _status_total(status):
    return status["todo_total"] + status["out"] + status["done"]


# -- the figures, counted and merged ----------------------------------------------------------


def test_the_modules_tests_import_leave_gevent_out():
    """Locust monkey-patches on import; pytest must never get it through these modules."""
    probe = (
        "import sys; import loadtest.runner, loadtest.figures, loadtest.options; "
        "print(sorted(m for m in ('gevent', 'locust') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def test_merged_worker_exports_give_the_same_figures_as_one_process():
    rng = random.Random(7)
    whole, workers = figures.Figures(), [figures.Figures() for _ in range(3)]
    for n in range(600):
        part = workers[n % 3]
        start = 1000.0 + n * 0.01
        outcome = rng.choice(["served", "served", "served", "no_items", "rate_limited"])
        items = rng.randint(1, 5) if outcome == "served" else 0
        rtt_s = rng.uniform(0.01, 2.0)
        for f in (whole, part):
            f.record_request(start, start + 0.002, outcome, items)
            if outcome == "served":
                f.record_done(start, start + rtt_s, items)
    master = figures.Figures()
    for part in workers:
        master.merge(part.export())
        part.reset()
        master.merge(part.export())  # an empty report changes nothing
    assert master.summary() == whole.summary()
    assert master.summary()["counts"]["items_claimed"] == master.summary()["rtt_ms"]["samples"]


def test_irsr_counts_only_misses_that_happened_while_items_remained():
    f = figures.Figures()
    f.record_request(10.0, 10.1, "served", 5)
    f.record_request(10.2, 10.3, "no_items")  # ended before a later claim started: a miss
    f.record_request(10.4, 10.5, "rate_limited")  # the same
    f.record_request(11.0, 11.2, "served", 1)  # the last successful claim starts at 11.0
    f.record_request(10.9, 11.1, "no_items")  # overlapped it: the queue may have been empty
    f.record_request(12.0, 12.1, "no_items")  # after the queue ran dry
    s = f.summary()
    assert s["misses_while_items_remained"] == 2
    assert s["irsr"] == pytest.approx(2 / 4)
    assert s["counts"]["no_items_404"] == 3 and s["counts"]["rate_limited_429"] == 1
    assert figures.threshold_failures(s, 0.99, 0, 0)[0].startswith("IRSR 0.5000 below 0.99")


def test_timeline_has_one_row_per_second_for_plots():
    f = figures.Figures()
    f.record_request(100.2, 100.3, "served", 4)
    f.record_request(100.5, 100.6, "no_items")
    f.record_done(100.3, 101.3, 3)
    f.record_request(102.0, 102.5, "no_items")
    assert f.summary()["timeline"] == [
        {
            "t_s": 0,
            "requests": 2,
            "served": 1,
            "served_share": 0.5,
            "items_claimed": 4,
            "items_done": 0,
            "rtt_mean_ms": None,
        },
        {
            "t_s": 1,
            "requests": 0,
            "served": 0,
            "served_share": None,
            "items_claimed": 0,
            "items_done": 3,
            "rtt_mean_ms": 1000.0,
        },
        {
            "t_s": 2,
            "requests": 1,
            "served": 0,
            "served_share": 0.0,
            "items_claimed": 0,
            "items_done": 0,
            "rtt_mean_ms": None,
        },
    ]


def test_rtt_percentiles_come_from_the_histogram():
    f = figures.Figures()
    for ms in range(1, 101):
        f.record_done(0.0, ms / 1000, 1)
    rtt = f.summary()["rtt_ms"]
    assert (rtt["p50"], rtt["p95"], rtt["p99"], rtt["samples"]) == (50, 95, 99, 100)
    assert rtt["mean"] == pytest.approx(50.5)
    assert figures.rtt_bucket_ms(1.234) == 1200 and figures.rtt_bucket_ms(0.0456) == 46


def test_thresholds_name_each_breach():
    f = figures.Figures()
    f.record_request(1.0, 1.1, "served", 1)
    f.record_request(2.0, 2.1, "server_error")
    f.add("done_not_ok")
    f.add("server_5xx")
    f.add("backfeed_errors", 3)
    failures = figures.threshold_failures(f.summary(), 0.99, 1, 0)
    assert failures == [
        "2 answers with 5xx (at most 1 allowed)",
        "1 done calls not answered 200 OK (at most 0 allowed)",
        "3 backfeed posts failed (at most 0 allowed)",
    ]
    assert figures.threshold_failures(f.summary(), 0.99, 2, 1, 3) == []


@pytest.mark.parametrize(
    "spec, low, high",
    [
        ("const:0.5", 0.5, 0.5),
        ("uniform:0.1,0.3", 0.1, 0.3),
        ("exp:0.2", 0.0, 50.0),
        ("lognormal:0,0.5", 0.0, 100.0),
    ],
)
def test_download_time_specs_draw_within_their_range(spec, low, high):
    draw = options.download_time_sampler(spec, random.Random(1))
    assert all(low <= draw() <= high for _ in range(200))


@pytest.mark.parametrize("spec", ["uniform:0.1", "const:1,2", "normal:1", "exp:", "1.0"])
def test_bad_download_time_specs_are_refused(spec):
    with pytest.raises(ValueError, match="bad download time"):
        options.download_time_sampler(spec, random.Random(1))


def test_multi_and_back_off_follow_the_client():
    draw = options.multi_sampler("3-7", random.Random(2))
    assert {draw() for _ in range(300)} == {3, 4, 5, 6, 7}
    for bad in ("0", "7-3", "x"):
        with pytest.raises(ValueError, match="bad multi"):
            options.multi_sampler(bad, random.Random(2))
    delays = options.retry_delays(6.0)
    assert [round(next(delays), 3) for _ in range(26)][:3] == [6.0, 7.0, 8.0]
    assert next(delays) == pytest.approx(30.0)  # capped at seesaw-kit's 300 s, scaled


# -- whole runs against the real server -------------------------------------------------------


@pytest.mark.slow
def test_distributed_warriors_keep_irsr_and_account_for_every_item(live_server, admin, tmp_path):
    """Master plus two workers, multi=1..10, some items failed, some claims abandoned."""
    result = seeded_run(
        live_server,
        "ci-load",
        SEEDED,
        tmp_path,
        users=20,
        run_time_s=15,
        workers=2,
        download_time="uniform:0.01,0.05",
        fail_share=0.05,
        abandon_share=0.02,
        retry_delay_s=0.5,
    )
    summary, counts = result["summary"], result["summary"]["counts"]
    assert result["exit_code"] == 0, result["log"]
    assert result["passed"] and result["failures"] == []
    assert summary["irsr"] >= 0.99
    assert counts["server_5xx"] == 0 and counts["transport_errors"] == 0
    assert counts["done_not_ok"] == 0
    # Figures shipped from the workers: real work was done and every answered claim was counted.
    assert counts["items_claimed"] > 100 and counts["items_done"] > 50
    assert counts["items_claimed"] <= SEEDED
    assert summary["rtt_ms"]["samples"] == counts["items_done"]
    settled = counts["items_done"] + counts["items_failed"] + counts["items_abandoned"]
    assert settled <= counts["items_claimed"]
    # The run's own accounting, and ours straight from Redis. A call cut off when the run stopped
    # may have changed the server without the client hearing of it, hence the inequalities.
    accounting = result["accounting"]
    assert accounting["ok"] and accounting["total"] == accounting["expected_total"] == SEEDED
    status = census_verbs.status(admin, "ci-load")
    assert _status_total(status) == SEEDED
    assert status["done"] >= counts["items_done"]
    assert status["todo_total"] <= SEEDED - counts["items_claimed"]
    # Failed and abandoned items were never reported: nothing reclaims them here, so they are out.
    assert status["out"] >= counts["items_failed"] + counts["items_abandoned"]


@pytest.mark.slow
def test_a_rate_limited_project_fails_the_run_on_irsr(live_server, admin, tmp_path):
    """429s while items remain drag IRSR below 99%: the quitting listener fails the run."""
    project_verbs.create(admin, "ci-limited", {"rate_limit": "120", "rate_burst": "2"})
    result = seeded_run(
        live_server,
        "ci-limited",
        500,
        tmp_path,
        users=8,
        run_time_s=5,
        multi="1",
        download_time="const:0",
        retry_delay_s=0.05,
    )
    counts = result["summary"]["counts"]
    assert result["exit_code"] == 1
    assert counts["rate_limited_429"] > 0 and counts["requests_served"] > 0
    assert result["summary"]["irsr"] < 0.99
    assert any(line.startswith("IRSR") for line in result["failures"])
    assert result["accounting"]["ok"]  # slow is not lossy: every item still accounted for
    assert _status_total(census_verbs.status(admin, "ci-limited")) == 500


# -- the README's command, as written -----------------------------------------------------------

README_SCALE = {"--users": "8", "--spawn-rate": "8", "--run-time": "15s", "--seed-items": "2000"}


def readme_headless_commands(readme: str, port: int) -> str:
    """The README's "Load tests" shell lines up to the distributed run, at tiny scale on PORT.

    Only the scale and the port change; each must be found exactly once, so a README that
    drops or renames one of them fails here rather than being run at full scale.
    """
    section = readme.split("\n## Load tests\n", 1)[1].split("\n## ", 1)[0]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    script = block.split("\n# distributed", 1)[0]
    for option, value in README_SCALE.items():
        script, n = re.subn(rf"{option} \S+", f"{option} {value}", script)
        assert n == 1, f"README's load-test command: {option} found {n} times"
    script, n = re.subn(r"--host http://127\.0\.0\.1:8080", f"--host http://127.0.0.1:{port}", script)
    assert n == 1, "README's load-test command: --host http://127.0.0.1:8080 not found"
    return script


def _answers(url: str) -> bool:
    try:
        urllib.request.urlopen(url, timeout=2).read()
        return True
    except OSError:
        return False


@pytest.mark.slow
def test_the_readmes_locust_command_works_as_written(tmp_path):
    """Run the README's headless commands, as written but at tiny scale, in a directory where
    `make run` (tracker run --demo) runs: the Redis socket it names and the backfeed secret it
    creates must be the ones that work (backfeed errors fail the run)."""
    (tmp_path / "loadtest").symlink_to(ROOT / "loadtest")
    port = free_port()
    tracker, env = start_demo(tmp_path, port)
    try:
        url = f"http://127.0.0.1:{port}/demo/stats.json"
        wait_for(lambda: tracker.poll() is not None or _answers(url), 60, step_s=0.3)
        assert tracker.poll() is None, "tracker run exited"
        assert _answers(url), f"{url} did not answer within 60 s"
        script = readme_headless_commands((ROOT / "README.md").read_text(), port)
        done = subprocess.run(
            ["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180
        )
        assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
        result = json.loads((tmp_path / "figures.json").read_text())
        counts = result["summary"]["counts"]
        assert result["passed"] and result["failures"] == []
        assert result["accounting"]["ok"] and result["accounting"]["seeded"] == 2000
        assert counts["backfeed_posts"] > 0 and counts["backfeed_errors"] == 0
        assert counts["items_done"] > 0 and counts["server_5xx"] == 0
    finally:
        stop(tracker, timeout_s=30, group=True)
