"""The settings form's widgets: checkboxes, selects, number inputs with units, sections."""

from __future__ import annotations

from tracker_core.project import settings_schema

# Widgets for the settings form (tracker_core.project.settings_schema.SETTINGS holds what each one means).
FLAG_SETTINGS = frozenset({"paused", "ignore_global_blocked", "accept_queued_dones", "warrior_listed"})
CHOICE_SETTINGS = {"done_mode": ("keep", "discard", "offload")}
TEXTAREA_SETTINGS = frozenset({"description", "extra_parameters", "marker_html"})
SETTING_UNITS = {
    "rate_limit": "items/min",
    "rate_burst": "items",
    "max_claims_per_downloader": "claims",
    "max_multi": "items/request",
    "reclaim_ttl_s": "s",
    "claims_limit": "items",
    "max_reclaims": "reclaims",
    "offload_high": "items",
    "offload_low": "items",
    "offload_segment_items": "items",
    "backfeed_max_items": "items",
    "done_offload_high": "items",
    "log_maxlen": "entries",
    "max_bytes_per_item": "bytes",
}
SETTING_GROUPS = (
    (
        "Handing out",
        (
            "paused",
            "rate_limit",
            "rate_burst",
            "max_claims_per_downloader",
            "max_multi",
            "claims_limit",
            "min_version",
            "ignore_global_blocked",
            "accept_queued_dones",
            "extra_parameters",
        ),
    ),
    ("Reclaims", ("reclaim_ttl_s", "max_reclaims")),
    (
        "Storage",
        (
            "done_mode",
            "done_offload_high",
            "offload_high",
            "offload_low",
            "offload_segment_items",
            "backfeed_max_items",
            "log_maxlen",
            "max_bytes_per_item",
        ),
    ),
    (
        "Leaderboard and warrior HQ",
        (
            "title",
            "description",
            "warrior_listed",
            "repository",
            "logo",
            "marker_html",
            "lat_lng",
            "deadline",
            "host",
        ),
    ),
)


def setting_groups() -> list[tuple[str, list[str]]]:
    """The settings form's sections; a setting no section names goes under "Other"."""
    named = {n for _, names in SETTING_GROUPS for n in names}
    rest = [n for n in settings_schema.SETTINGS if n not in named]
    return [(title, list(names)) for title, names in SETTING_GROUPS] + ([("Other", rest)] if rest else [])
