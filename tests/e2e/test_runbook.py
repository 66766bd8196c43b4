"""docs/runbook.md: a section for every alert rule, links that resolve, and only CLI commands
the tracker has."""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from click.testing import CliRunner

from tracker_api.cli import main

REPO = Path(__file__).resolve().parents[2]
RUNBOOK = REPO / "docs" / "runbook.md"


def anchors(markdown: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces as hyphens."""
    headings = re.findall(r"^#+ (.+)$", markdown, re.M)
    return {re.sub(r"[^\w\- ]", "", h).strip().lower().replace(" ", "-") for h in headings}


def test_every_alert_has_the_section_its_runbook_url_names():
    rules = yaml.safe_load((REPO / "monitoring" / "alerts.yml").read_text())["groups"]
    urls = [rule["annotations"]["runbook_url"] for group in rules for rule in group["rules"]]
    assert len(urls) >= 5
    found = anchors(RUNBOOK.read_text())
    for url in urls:
        # Absolute from the runbook_base external label, else this path (monitoring/alerts.yml).
        path, anchor = url.split("#")
        assert path.endswith('"docs/runbook.md" }}') and anchor in found, url


def test_relative_links_resolve():
    for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", RUNBOOK.read_text()):
        assert (RUNBOOK.parent / target).exists(), target


def test_every_tracker_command_named_exists():
    text = RUNBOOK.read_text()
    commands = {tuple(m.split()) for m in re.findall(r"`tracker((?: [a-z][a-z-]+){1,3})", text)}
    assert len(commands) >= 10
    for words in commands:
        # The longest prefix that is a command (the rest are arguments such as "tracker run refuses").
        for size in range(len(words), 0, -1):
            if CliRunner().invoke(main, [*words[:size], "--help"]).exit_code == 0:
                break
        else:
            raise AssertionError(f"no such command: tracker {' '.join(words)}")
