"""The systemd units shipped in packaging/systemd/: valid, hardened, journal-logging, and the
processes they start work under the hardening they promise (MemoryDenyWriteExecute).

Fast (a few seconds); `systemd-analyze` checks skip where it is not installed.
"""

from __future__ import annotations

import ctypes
import json
import re
import shutil
import subprocess
import urllib.request
from pathlib import Path

import pytest
from click.testing import CliRunner

from support.paths import TRACKER_BIN
from support.processes import free_port, start, start_serve, stop, wait_for_port
from tracker_api.cli import main
from tracker_core.admin import item_verbs, project_verbs

REPO = Path(__file__).resolve().parents[2]
UNITS_DIR = REPO / "packaging" / "systemd"
UNITS = ("tracker-api.service", "tracker-live.service", "tracker-maintain.service")
HARDENING = UNITS_DIR / "tracker-.service.d" / "10-hardening.conf"
ENV_TEMPLATE = REPO / "ansible" / "roles" / "tracker" / "templates" / "tracker.env.j2"
SHIPPED_BIN = "/opt/tracker/venv/bin/tracker"
# What the issue asks of every unit, as systemd spells it (in the unit or the shared drop-in).
REQUIRED = {
    "NoNewPrivileges": "yes",
    "ProtectSystem": "strict",
    "ProtectHome": "yes",
    "PrivateTmp": "yes",
    "PrivateDevices": "yes",
    "ProtectKernelTunables": "yes",
    "ProtectKernelModules": "yes",
    "ProtectControlGroups": "yes",
    "RestrictAddressFamilies": "AF_UNIX AF_INET AF_INET6",
    "RestrictNamespaces": "yes",
    "LockPersonality": "yes",
    "MemoryDenyWriteExecute": "yes",
    "StandardOutput": "journal",
    "StandardError": "journal",
    "Restart": "on-failure",
}
# prctl(PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN): the kernel's own form of MemoryDenyWriteExecute
# (systemd uses it where the kernel has it), inherited by children and kept across execve.
PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN = 65, 1
NAMES = ["https://example.com/a b/1?q=%25&x=#frag", "https://example.com/" + "long/" * 200 + "end"]


def directives(text: str) -> dict[str, str]:
    return dict(re.findall(r"^(\w+)=(.*)$", text, re.M))


def effective(unit: str) -> dict[str, str]:
    """The unit's directives with the shared drop-in's on top (systemd reads the drop-in last)."""
    return directives((UNITS_DIR / unit).read_text()) | directives(HARDENING.read_text())


@pytest.fixture
def unit_path(tmp_path):
    """The shipped units in a unit directory, ExecStart pointed at this checkout's `tracker`
    (verify refuses a command that does not exist)."""
    shutil.copytree(UNITS_DIR, tmp_path / "units")
    for unit in UNITS:
        path = tmp_path / "units" / unit
        path.write_text(path.read_text().replace(SHIPPED_BIN, str(TRACKER_BIN)))
    return tmp_path / "units"


def analyze(unit_path: Path, *args: str) -> subprocess.CompletedProcess:
    if not shutil.which("systemd-analyze"):
        pytest.skip("systemd-analyze not installed (Debian package systemd)")
    env = {"SYSTEMD_UNIT_PATH": f"{unit_path}:", "PATH": "/usr/bin:/bin", "SYSTEMD_PAGER": ""}
    return subprocess.run(
        ["systemd-analyze", *args], env=env, capture_output=True, text=True, timeout=60, cwd=unit_path
    )


def test_units_pass_systemd_analyze_verify_without_a_complaint(unit_path):
    result = analyze(unit_path, "verify", "--man=no", *(str(unit_path / unit) for unit in UNITS))
    # verify exits 0 on unknown keys and bad values (it only prints them): any output is a fault.
    assert result.returncode == 0 and result.stderr.strip() == "", result.stderr


def test_redis_instances_take_the_hardening_drop_in(unit_path):
    """The redis role's instance unit (placeholders filled) with the shipped drop-in."""
    template = REPO / "ansible" / "roles" / "redis" / "templates" / "redis-tracker@.service.j2"
    (unit_path / "redis-tracker@.service").write_text(re.sub(r"\{\{.*?\}\}", "1", template.read_text()))
    if not Path("/usr/bin/redis-server").exists():
        pytest.skip("redis-server not installed")
    unit = str(unit_path / "redis-tracker@6379.service")
    verified = analyze(unit_path, "verify", "--man=no", unit)
    assert verified.returncode == 0 and verified.stderr.strip() == "", verified.stderr
    security = analyze(unit_path, "security", "--offline=yes", "--no-pager", unit)
    level = float(re.search(r"Overall exposure level for \S+: ([\d.]+)", security.stdout).group(1))
    assert level < 3.5, security.stdout  # 9.2 without it; no SystemCallFilter (untested on Redis)


def test_a_typo_in_the_shared_drop_in_is_caught(unit_path):
    conf = unit_path / "tracker-.service.d" / "10-hardening.conf"
    conf.write_text(conf.read_text().replace("ProtectSystem=strict", "ProtectSystem=stricter"))
    result = analyze(unit_path, "verify", "--man=no", str(unit_path / "tracker-api.service"))
    assert "stricter" in result.stderr


@pytest.mark.parametrize("unit", UNITS)
def test_every_unit_gets_the_shared_hardening(unit_path, unit):
    result = analyze(unit_path, "security", "--offline=yes", "--no-pager", str(unit_path / unit))
    level = float(re.search(r"Overall exposure level for \S+: ([\d.]+)", result.stdout).group(1))
    assert level < 2.5, result.stdout  # the unit alone scores 9.2 ("UNSAFE")


@pytest.mark.parametrize("unit", UNITS)
def test_units_are_hardened_and_log_to_the_journal(unit):
    settings = effective(unit)
    assert {key: settings.get(key) for key in REQUIRED} == REQUIRED
    assert settings["ExecStart"].split()[0] == SHIPPED_BIN
    assert settings["EnvironmentFile"] == "/etc/tracker/tracker.env"
    for path in [UNITS_DIR / unit, HARDENING]:
        assert not re.search(r"^Standard\w+=(append|file|truncate):", path.read_text(), re.M)


def test_every_variable_of_the_roles_environment_file_is_read_by_a_command():
    """The units run bare commands: a misspelt variable in tracker.env would silently leave a
    setting at its default, so each one must be an option's (or the root's) variable."""
    # As the commands themselves name them (their --help), whatever click derives them from.
    known = set()
    for args in ([], ["serve"], ["live"], ["maintain"]):
        help_text = CliRunner().invoke(main, [*args, "--help"], terminal_width=200).output
        known |= set(re.findall(r"env\s+var:\s+(TRACKER_[A-Z_]+)", help_text))
    written = set(re.findall(r"^([A-Z_]+)=", ENV_TEMPLATE.read_text(), re.M))
    assert {"TRACKER_SERVE_HOST", "TRACKER_LIVE_PORT", "TRACKER_SEGMENTS_DIR"} <= written
    assert written - known == set()


def _refuse_write_execute() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_MDWE)")


def _mdwe_available() -> bool:
    probe = subprocess.run(
        ["python3", "-c", "import mmap; mmap.mmap(-1, 4096, prot=7)"],
        preexec_fn=_refuse_write_execute,
        capture_output=True,
    )
    return probe.returncode != 0 and b"PermissionError" in probe.stderr


def _get_json(url: str, data: bytes | None = None):
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as res:
        return json.loads(res.read())


def test_processes_work_where_memory_may_not_be_writable_and_executable(redis_url, admin, tmp_path):
    # The probe is the proof the rule is on: a writable+executable mapping is refused.
    if not _mdwe_available():
        pytest.skip("the kernel does not refuse writable+executable memory (PR_SET_MDWE, Linux 6.3+)")
    project_verbs.create(admin, "mdwe")
    item_verbs.add(admin, "mdwe", NAMES)
    server, port = start_serve(redis_url, workers=2, preexec=_refuse_write_execute)
    live_port = free_port()
    feed = start(
        [TRACKER_BIN, "live", "--port", str(live_port)],
        env={"TRACKER_REDIS_URL": redis_url, "PATH": "/usr/bin:/bin"},
        preexec=_refuse_write_execute,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        assert "mdwe" in json.dumps(_get_json(f"{base}/projects.json"))
        body = json.dumps({"downloader": "mdwe-warrior", "api_version": "2"}).encode()
        claimed = {_get_json(f"{base}/mdwe/request", body)["item_name"] for _ in NAMES}
        assert claimed == set(NAMES)
        wait_for_port(live_port, feed)
        maintain = subprocess.run(
            [TRACKER_BIN, "--redis-url", redis_url, "maintain", "--once", "--segments-dir", str(tmp_path)],
            preexec_fn=_refuse_write_execute,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert maintain.returncode == 0, maintain.stderr
        assert server.poll() is None and feed.poll() is None
    finally:
        stop(feed)
        assert stop(server) == 0
