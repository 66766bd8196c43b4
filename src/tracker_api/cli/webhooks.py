"""`tracker webhook ...`: receivers of the maintainer's events, added (secret shown once),
listed with their delivery figures, removed (docs/operations.md, "Webhooks")."""

from __future__ import annotations

import click

from tracker_api.cli import output
from tracker_api.cli.root import context, main, show
from tracker_core.admin import webhook_verbs


@main.group("webhook")
def webhook():
    """Webhooks: a signed JSON POST to a URL for each event `tracker maintain` detects."""


@webhook.command("add")
@click.argument("url")
@click.option(
    "--project",
    default=None,
    help="Only this project's events (default: every project's, and the deployment's).",
)
@click.option(
    "--events",
    default=None,
    metavar="E1,E2",
    help="Events to send, comma-separated (default: all): project.drained, project.paused, project.resumed, "
    "backlog.growing, refill.stalled, offload.stuck, redis.failover, clock.off.",
)
def webhook_add(url, project, events):
    """Add a receiver at URL (http or https) and print its secret once: it signs every POST."""
    chosen = None if events is None else [e.strip() for e in events.split(",") if e.strip()]
    result = webhook_verbs.add(context(), url, project, chosen)
    output.emit(
        result,
        f"webhook {result['hook_id']} added for {', '.join(result['events'])}\n"
        f"secret (shown once; it signs each POST): {result['secret']}",
    )


@webhook.command("list")
@click.option("--project", default=None, help="Only this project's webhooks.")
def webhook_list(project):
    """List the webhooks: URL, project, events, delivered, failures (failed attempts), dropped
    (deliveries given up), the last status; never a secret."""
    show(webhook_verbs.list_hooks, project)


@webhook.command("remove")
@click.argument("hook_id")
def webhook_remove(hook_id):
    """Remove the webhook HOOK_ID (its queued deliveries are dropped)."""
    result = webhook_verbs.remove(context(), hook_id)
    output.emit(result, f"removed {hook_id}")


# `tracker maintain`'s options for the webhooks: name -> (default, lowest, highest, help).
MAINTAIN_OPTIONS = {
    "webhook_interval_s": (
        0.5,
        0.05,
        60.0,
        "Seconds between the webhook detector's checks (and the deliverer's polls).",
    ),
    "webhook_timeout_s": (5.0, 0.1, 60.0, "Seconds a receiver has to answer one POST."),
    "webhook_attempts": (12, 1, 100, "Attempts at one delivery before it is dropped (and counted)."),
    "webhook_retry_base_s": (
        10.0,
        0.01,
        3600.0,
        "The wait after a first failed attempt; doubled after each.",
    ),
    "webhook_backlog_growth": (
        100_000,
        1,
        10**12,
        "backlog.growing: items above the window's lowest backlog.",
    ),
    "webhook_backlog_window_s": (3600.0, 1.0, 30 * 86400.0, "backlog.growing: the window, in seconds."),
    "webhook_stall_s": (
        120.0,
        0.1,
        86400.0,
        "refill.stalled, offload.stuck: seconds the problem lasts first.",
    ),
    "webhook_clock_off_s": (1.0, 0.001, 86400.0, "clock.off: seconds this node's clock is off Redis's."),
    "webhook_drained_cooldown_s": (
        600.0,
        0.0,
        30 * 86400.0,
        "project.drained: at most one per project this often.",
    ),
}


def maintain_options(command):
    """Add MAINTAIN_OPTIONS to `tracker maintain` (each also from TRACKER_MAINTAIN_...)."""
    for name, (default, low, high, help_text) in reversed(MAINTAIN_OPTIONS.items()):
        kind: click.ParamType = (
            click.IntRange(int(low), int(high)) if isinstance(default, int) else click.FloatRange(low, high)
        )
        command = click.option("--" + name.replace("_", "-"), default=default, type=kind, help=help_text)(
            command
        )
    return command


def maintain_args(options: dict) -> list[str]:
    """The webhook options as a supervised `tracker maintain` child is given them."""
    return [a for name in MAINTAIN_OPTIONS for a in ("--" + name.replace("_", "-"), str(options[name]))]


def notifier(client, holder: str, options: dict):
    """The webhooks' Notifier for `tracker maintain`, from its options: --webhook-FIELD sets the
    field of Thresholds or DeliveryPolicy of that name."""
    from dataclasses import fields

    from tracker_core.notify.delivery import DeliveryPolicy, Notifier
    from tracker_core.notify.events import Thresholds

    def given(cls):
        return cls(
            **{f.name: options[f"webhook_{f.name}"] for f in fields(cls) if f"webhook_{f.name}" in options}
        )

    return Notifier(
        client, holder, given(Thresholds), given(DeliveryPolicy), interval_s=options["webhook_interval_s"]
    )
