"""compose.yaml and the Dockerfile: valid, and they run what the tracker's CLI knows.

No container is started here (that needs a Docker daemon and images: docs/runbook.md,
"Containers", says how the image was built and smoke-tested).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from tracker_api.cli import main

REPO = Path(__file__).resolve().parents[2]
COMPOSE = REPO / "compose.yaml"
DOCKERFILE = REPO / "Dockerfile"


@pytest.fixture(scope="module")
def compose():
    return yaml.safe_load(COMPOSE.read_text())


def compose_cli() -> list[str] | None:
    """`docker compose` (the plugin) or `docker-compose`, whichever is installed."""
    if shutil.which("docker"):
        probe = subprocess.run(["docker", "compose", "version"], capture_output=True, timeout=30)
        if probe.returncode == 0:
            return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    return None


def test_compose_file_is_valid_for_compose_itself(tmp_path):
    cli = compose_cli()
    if cli is None:
        pytest.skip("neither `docker compose` nor docker-compose installed")
    result = subprocess.run(
        [*cli, "-f", str(COMPOSE), "config", "-q"], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr


def test_redis_keeps_an_append_only_file_on_a_volume_and_evicts_nothing(compose):
    redis = compose["services"]["redis"]
    command = redis["command"]
    settings = {command[i]: command[i + 1] for i in range(1, len(command) - 1) if command[i].startswith("--")}
    assert settings["--appendonly"] == "yes" and settings["--appendfsync"] == "everysec"
    assert settings["--maxmemory-policy"] == "noeviction"
    # Without a password, protected mode would refuse every other container.
    assert settings["--protected-mode"] == "no" and "ports" not in redis
    volume, target = redis["volumes"][0].split(":")
    assert target == "/data" and volume in compose["volumes"]


def test_every_tracker_service_runs_a_command_the_cli_has(compose):
    services = compose["services"]
    assert {"serve", "live", "maintain", "setup", "redis"} <= set(services)
    for name in ("serve", "live", "maintain"):
        service = services[name]
        assert service["environment"]["TRACKER_REDIS_URL"] == "redis://redis:6379/0"
        assert service["depends_on"]["redis"]["condition"] == "service_healthy"
        # The options each passes are the command's own (click refuses unknown ones).
        result = CliRunner().invoke(main, [*service["command"], "--help"])
        assert result.exit_code == 0, result.output
    assert services["serve"]["ports"] == ["8080:8080"] and services["live"]["ports"] == ["8081:8081"]
    # The demo project's setup calls only commands the CLI has.
    script = services["setup"]["command"][0]
    for line in script.splitlines():
        words = re.findall(r"tracker ((?:[a-z-]+ ){1,2})", line)
        for group in words:
            result = CliRunner().invoke(main, [*group.split(), "--help"])
            assert result.exit_code == 0, (line, result.output)


def test_image_builds_the_compiled_modules_and_runs_unprivileged():
    text = DOCKERFILE.read_text()
    assert re.search(r"^FROM debian:bookworm", text, re.M)
    assert (
        "import tracker_core.compiled._protocol_c, tracker_core.compiled._bloom_c, tracker_core.compiled._classify_c"
        in text
    )
    users = re.findall(r"^USER (\S+)", text, re.M)
    assert users and users[-1] not in ("root", "0")
    ignored = (REPO / ".dockerignore").read_text().splitlines()
    # Everything is left out but what the build copies; never a host build product.
    assert "*" in ignored and "src/**/*.so" in ignored and "!src/" in ignored
