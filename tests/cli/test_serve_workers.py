"""The --workers default of `tracker serve` and `tracker run`: what the docs and --help say it is,
and TRACKER_SERVE_WORKERS / TRACKER_RUN_WORKERS still override it."""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

from support.paths import ROOT
from tracker_api.cli import main
from tracker_api.server import WORKERS_PER_CORE, default_workers


def workers_given(command: str, args: list[str]) -> int:
    """The workers value `tracker COMMAND ARGS` would start with (options parsed, nothing started)."""
    with main.make_context("tracker", [command]) as root:
        with main.commands[command].make_context(command, args, parent=root) as ctx:
            return ctx.params["workers"]


def test_the_default_is_workers_per_core_times_the_cores(monkeypatch):
    monkeypatch.setattr("os.cpu_count", lambda: 3)
    assert default_workers() == 3 * WORKERS_PER_CORE
    assert default_workers(cores=16) == 16 * WORKERS_PER_CORE
    monkeypatch.setattr("os.cpu_count", lambda: None)  # unknown: as one core
    assert default_workers() == WORKERS_PER_CORE


@pytest.mark.parametrize("command", ["serve", "run"])
def test_serve_and_run_start_the_default_without_an_option(command, monkeypatch):
    monkeypatch.delenv(f"TRACKER_{command.upper()}_WORKERS", raising=False)
    assert workers_given(command, []) == default_workers()


@pytest.mark.parametrize("command", ["serve", "run"])
def test_the_environment_and_the_option_override_the_default(command, monkeypatch):
    monkeypatch.setenv(f"TRACKER_{command.upper()}_WORKERS", "3")
    assert workers_given(command, []) == 3
    assert workers_given(command, ["--workers", "5"]) == 5  # the option wins over the environment


@pytest.mark.parametrize("command", ["serve", "run"])
def test_help_gives_the_default_and_why(command):
    result = CliRunner().invoke(main, [command, "--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    option = text[text.index("--workers") :]
    assert f"{WORKERS_PER_CORE} per core" in option.split("--trust-forwarded")[0]
    assert "Redis" in option.split("--trust-forwarded")[0]  # the why: workers wait on Redis
    assert f"default: {default_workers()}" in option.split("--trust-forwarded")[0]


def test_the_operations_doc_states_the_same_default():
    doc = (ROOT / "docs" / "operations.md").read_text()
    sizing = doc[doc.index("## Sizing") :]
    stated = re.search(r"\*\*(one|two|three|four) workers? per core\*\*", sizing)
    assert stated, "docs/operations.md's Sizing section states the default as **N workers per core**"
    words = {"one": 1, "two": 2, "three": 3, "four": 4}
    assert words[stated.group(1)] == WORKERS_PER_CORE
    assert "capacity.md" in sizing  # where the figures behind it are
