"""Locust warriors: claim, simulate the download, report done (and backfeed), like seesaw-kit.

Run it headless on one machine, or as a master with workers; the warrior options are described
in options.py (Locust's ``--help`` is printed before it reads a locustfile). The figures operators
watch (IRSR, RTT claim->done, items per second, 404/429/5xx) are counted in event listeners,
shipped from workers to the master, shown in the web UI's "Warriors" tab and at /warriors.json,
printed at the end, and checked against thresholds by the ``quitting`` listener, which sets the
exit code.
"""

from __future__ import annotations

import itertools
import json
import logging
import random
import sys
import time
import uuid
from pathlib import Path

import gevent
from locust import User, constant, events, task
from locust import log as locust_log
from locust.runners import MasterRunner, WorkerRunner

# Import the siblings as the package `loadtest`, wherever Locust was started from.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from loadtest import figures as figures_mod
from loadtest import options
from loadtest.warrior import WarriorClient, item_outcome

log = logging.getLogger("warriors")

# This process's figures: on a worker, what happened since its last report to the master; on the
# master or a local run, the whole run.
FIGURES = figures_mod.Figures()
FINAL_REPORT_WAIT_S = 10.0
_run = {"seeding": None, "seeding_error": None, "final_reports": set()}
_downloader_numbers = itertools.count()


@events.init_command_line_parser.add_listener
def _add_options(parser, **_kw):
    options.add_arguments(parser)


def _is_worker(environment) -> bool:
    return isinstance(environment.runner, WorkerRunner)


class Warrior(User):
    """One warrior: request -> download -> done, with seesaw-kit's back-off after a non-200."""

    wait_time = constant(0)  # the pipeline paces itself: download time and back-off

    def on_start(self):
        opts = self.environment.parsed_options
        for name in ("fail_share", "abandon_share", "backfeed_share", "backfeed_repeat_share"):
            options.check_share(name, getattr(opts, name))
        self.opts = opts
        self.rng = random.Random()
        worker_index = getattr(self.environment.runner, "worker_index", 0)
        self.downloader = f"lw{worker_index}-{next(_downloader_numbers)}"
        self.client = WarriorClient(
            self.host,
            opts.project,
            self.downloader,
            opts.client_version,
            self.environment.events.request,
            keep_alive=opts.keep_alive,
        )
        self.next_multi = options.multi_sampler(opts.multi, self.rng)
        self.download_time = options.download_time_sampler(opts.download_time, self.rng)
        self.delays = options.retry_delays(opts.retry_delay_s)
        self.backfeed_tag = uuid.uuid4().hex[:10]  # new names stay new across runs and users
        self.backfed: list[str] = []

    def on_stop(self):
        self.client.close()

    def _back_off(self) -> None:
        gevent.sleep(next(self.delays))

    def _answered(self) -> None:
        self.delays = options.retry_delays(self.opts.retry_delay_s)  # a 200 resets the back-off

    @task
    def work_one_claim(self):
        claim = self.client.request_items(self.next_multi())
        if claim is None:
            self._back_off()
            return
        self._answered()
        gevent.sleep(self.download_time())
        if self.rng.random() < self.opts.abandon_share:
            item_outcome.fire(failed=0, abandoned=len(claim.names))
            return
        if self.opts.backfeed_share and self.rng.random() < self.opts.backfeed_share:
            self._backfeed()
        succeeded = [n for n in claim.names if self.rng.random() >= self.opts.fail_share]
        item_outcome.fire(failed=len(claim.names) - len(succeeded), abandoned=0)
        if not succeeded:
            return  # all failed: no done at all, reclaiming brings them back
        while not self.client.send_done(claim, succeeded, bytes_data=1000 * len(succeeded)):
            self._back_off()  # the client retries a done forever at its back-off
        self._answered()

    def _backfeed(self) -> None:
        count = max(1, self.opts.backfeed_items)
        repeats = min(len(self.backfed), round(count * self.opts.backfeed_repeat_share))
        names = self.rng.sample(self.backfed, repeats) if repeats else []
        fresh = [
            f"{self.downloader}-{self.backfeed_tag}-{len(self.backfed) + i}" for i in range(count - repeats)
        ]
        if self.client.backfeed(self.opts.backfeed_secret, fresh + names, new=len(fresh)):
            self.backfed.extend(fresh)
        # A refused backfeed is counted (and fails the run by default). The real client would
        # retry it ten times and then fail the item; here the item's fate is drawn separately.


# -- counting ---------------------------------------------------------------------------------


@events.request.add_listener
def _count_call(context, **_kw):
    call = (context or {}).get("warrior_call")
    if call is None:
        return
    status = context["status"]
    if call == "request":
        answered_at = _kw["start_time"] + _kw["response_time"] / 1000
        FIGURES.record_request(_kw["start_time"], answered_at, context["outcome"], context["items"])
        return
    if status is None:
        FIGURES.add("transport_errors")
    elif status >= 500:
        FIGURES.add("server_5xx")
    if call == "done":
        FIGURES.add("done_calls")
        if context["ok"]:
            FIGURES.record_done(context["claimed_at"], context["answered_at"], context["items"])
        else:
            FIGURES.add("done_not_ok")
    elif call == "backfeed":
        FIGURES.add("backfeed_posts")
        if context["ok"]:
            FIGURES.add("backfeed_items_new", context["new"])
            FIGURES.add("backfeed_items_repeat", context["repeat"])
        else:
            FIGURES.add("backfeed_errors")


@item_outcome.add_listener
def _count_items(failed, abandoned, **_kw):
    FIGURES.add("items_failed", failed)
    if abandoned:
        FIGURES.add("items_abandoned", abandoned)
        FIGURES.add("claims_abandoned")


@events.report_to_master.add_listener
def _ship_figures(client_id, data, **_kw):
    data["warriors"] = FIGURES.export()
    FIGURES.reset()


@events.worker_report.add_listener
def _merge_figures(client_id, data, **_kw):
    if "warriors" in data:
        FIGURES.merge(data["warriors"])


@events.reset_stats.add_listener
def _reset_figures(**_kw):
    FIGURES.reset()


# -- start and end of a run -------------------------------------------------------------------


@events.init.add_listener
def _on_init(environment, **_kw):
    runner = environment.runner
    if isinstance(runner, WorkerRunner):
        runner.register_message("warriors_final", _worker_final_report, concurrent=True)
    elif isinstance(runner, MasterRunner):
        runner.register_message("warriors_figures", _master_receive_final)
    if environment.web_ui is not None:
        _extend_web_ui(environment)


@events.test_start.add_listener
def _on_test_start(environment, **_kw):
    FIGURES.reset()
    if _is_worker(environment):
        return
    opts = environment.parsed_options
    _run["seeding"] = _run["seeding_error"] = None
    if opts.tracker_redis_url and opts.seed_items > 0:
        try:
            # Imported here: it needs the tracker's own package, which only the master needs.
            from loadtest import seeding

            _run["seeding"] = seeding.seed(opts.tracker_redis_url, opts.project, opts.seed_items)
        except Exception as exc:  # noqa: BLE001 - judged at the end: the run fails
            _run["seeding_error"] = f"seeding failed: {type(exc).__name__}: {exc}"
            log.error(_run["seeding_error"])
            return
        log.info("seeded %s with %d items", opts.project, opts.seed_items)


def _worker_final_report(environment, msg, **_kw):
    """Stop this worker's warriors, then send everything not yet reported to the master."""
    environment.runner.stop()
    environment.runner.send_message("warriors_figures", {"warriors": FIGURES.export()})
    FIGURES.reset()


def _master_receive_final(environment, msg, **_kw):
    FIGURES.merge(msg.data["warriors"])
    _run["final_reports"].add(msg.node_id)


@events.test_stopping.add_listener
def _collect_final_reports(environment, **_kw):
    """On the master, make every worker stop and report before the figures are judged.

    Locust's own final worker report arrives after ``quitting`` has fired; ours must not.
    """
    runner = environment.runner
    if not isinstance(runner, MasterRunner):
        return
    workers = {c.id for c in runner.clients.all}
    _run["final_reports"] = set()
    runner.send_message("warriors_final")
    deadline = time.monotonic() + FINAL_REPORT_WAIT_S
    while not workers <= _run["final_reports"] and time.monotonic() < deadline:
        gevent.sleep(0.1)
    missing = workers - _run["final_reports"]
    if missing:
        log.warning("no final warrior figures from %d worker(s): %s", len(missing), sorted(missing))


def final_figures(environment) -> dict:
    """Return the run's summary, threshold failures and item accounting (master or local)."""
    opts = environment.parsed_options
    summary = FIGURES.summary()
    failures = figures_mod.threshold_failures(
        summary, opts.min_irsr, opts.max_5xx, opts.max_done_not_ok, opts.max_backfeed_errors
    )
    accounting = None
    if _run["seeding_error"]:
        failures.append(_run["seeding_error"])
    if _run["seeding"] is not None:
        from loadtest import seeding

        try:
            accounting = seeding.account(
                opts.tracker_redis_url,
                _run["seeding"],
                summary["counts"]["backfeed_items_new"],
                summary["counts"]["items_done"],
            )
            failures += accounting["failures"]
        except Exception as exc:  # noqa: BLE001 - a broken check must fail the run, not crash it
            failures.append(f"accounting failed: {type(exc).__name__}: {exc}")
    # We set the exit code, so Locust's own reasons to fail must count here too.
    if environment.runner is not None and environment.runner.exceptions:
        failures.append(
            f"{len(environment.runner.exceptions)} kinds of exception in the warriors (see Locust's report)"
        )
    if locust_log.unhandled_greenlet_exception:
        failures.append("an event handler or greenlet raised (see the log)")
    return {
        "summary": summary,
        "accounting": accounting,
        "failures": failures,
        "passed": not failures,
        "thresholds": {
            "min_irsr": opts.min_irsr,
            "max_5xx": opts.max_5xx,
            "max_done_not_ok": opts.max_done_not_ok,
            "max_backfeed_errors": opts.max_backfeed_errors,
        },
    }


@events.quitting.add_listener
def _judge_run(environment, **_kw):
    if _is_worker(environment):
        environment.process_exit_code = 0  # the master judges the whole run
        return
    result = final_figures(environment)
    print(figures_mod.format_summary(result["summary"]), file=sys.stderr)
    if result["accounting"] is not None:
        a = result["accounting"]
        print(
            f"  accounting                 {a['total']} items in queues+out+done of "
            f"{a['expected_total']} expected ({a['todo_total']} todo, {a['out']} out, "
            f"{a['done']} done)",
            file=sys.stderr,
        )
    for line in result["failures"]:
        print(f"  FAILED: {line}", file=sys.stderr)
    if environment.parsed_options.figures_json:
        Path(environment.parsed_options.figures_json).write_text(json.dumps(result, indent=2))
    environment.process_exit_code = 0 if result["passed"] else 1


# -- web UI -----------------------------------------------------------------------------------


def _rows(summary: dict) -> list[dict]:
    c, rtt = summary["counts"], summary["rtt_ms"]
    irsr = "n/a" if summary["irsr"] is None else f"{summary['irsr'] * 100:.2f}%"
    pairs = [
        ("IRSR while items remained", irsr),
        ("misses while items remained", summary["misses_while_items_remained"]),
        (
            "RTT claim->done mean / p50 / p95 / p99 (ms)",
            f"{rtt['mean']} / {rtt['p50']} / {rtt['p95']} / {rtt['p99']}",
        ),
        ("items claimed per s", summary["items_claimed_per_s"]),
        ("items done per s", summary["items_done_per_s"]),
    ]
    pairs += [(name, c[name]) for name in figures_mod.COUNTERS]
    return [{"figure": name, "value": str(value)} for name, value in pairs]


def _extend_web_ui(environment) -> None:
    """Add a "Warriors" tab (a table refreshed with the stats) and /warriors.json."""
    from flask import request as flask_request

    app = environment.web_ui.app
    environment.web_ui.template_args["extended_tabs"] = [{"title": "Warriors", "key": "warriors"}]
    environment.web_ui.template_args["extended_tables"] = [
        {
            "key": "warriors",
            "structure": [{"key": "figure", "title": "Figure"}, {"key": "value", "title": "Value"}],
        }
    ]

    @app.route("/warriors.json")
    def warriors_json():
        return FIGURES.summary()

    @app.after_request
    def add_warrior_figures(response):
        if flask_request.path.endswith("/stats/requests") and response.is_json:
            payload = response.get_json()
            payload["extended_stats"] = [{"key": "warriors", "data": _rows(FIGURES.summary())}]
            response.set_data(json.dumps(payload))
        return response
