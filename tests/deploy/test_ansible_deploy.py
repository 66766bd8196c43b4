"""Apply ansible/site.yml to throwaway Debian roots and drive the deployed tracker through HAProxy.

Four "servers" (a Redis host, two tracker nodes, a load balancer) are Debian roots made by
debootstrap and provisioned by the playbook over Ansible's chroot connection. Each then runs in
its own network namespace on a private bridge, with the commands of the units Ansible wrote (a
chroot has no systemd), and real seesaw-kit warriors in a fifth namespace work a seeded project
through the load balancer until every item is done. Needs root; `make deploy-test` runs it.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ANSIBLE_DIR = REPO / "ansible"
VENV_BIN = Path(sys.executable).parent
DRIVER = REPO / "tests" / "support" / "warrior_driver.py"
BASE_CACHE = Path(os.environ.get("TRACKER_DEPLOY_CACHE", "/var/cache/tracker-deploy"))
BASE_TARBALL = BASE_CACHE / "bookworm-server.tar"
ROOTS = REPO / "var" / "deploy-roots"
LAST_RUN = ANSIBLE_DIR / "LAST_RUN.md"
# What a freshly installed Debian server has and the roles rely on: systemd (units), procps
# (sysctl), Python for Ansible.
SERVER_PACKAGES = "python3,python3-apt,ca-certificates,systemd,systemd-sysv,procps,iproute2"
SUBNET = "10.213.0"
BRIDGE = "trkdbr0"
# name -> (last octet, inventory groups); tracker2's root is a copy of tracker1's, re-provisioned.
SERVERS = {
    "redis1": (11, ["redis"]),
    "tracker1": (21, ["tracker"]),
    "tracker2": (22, ["tracker"]),
    "lb": (31, ["loadbalancer"]),
}
CLIENT = ("client", 99)
PROJECT = "deploydemo"
ITEMS = 400
WARRIORS, MULTI = 2, 10
LOCUST_PROJECT, LOCUST_ITEMS, LOCUST_USERS, LOCUST_SECONDS = "deploylocust", 600, 10, 20

pytestmark = [pytest.mark.deploy, pytest.mark.timeout(3600)]


def run(command, *, check=True, **kwargs):
    """Run a command, failing the test with its output when it fails."""
    result = subprocess.run(command, text=True, capture_output=True, **kwargs)
    if check and result.returncode != 0:
        pytest.fail(
            f"{command!r} failed ({result.returncode}):\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
        )
    return result


def ip(name: str) -> str:
    return f"{SUBNET}.{dict((n, o) for n, (o, _) in SERVERS.items())[name]}"


def debian_mirror() -> str:
    """Use the host's own Debian mirror (from its apt sources) for the throwaway roots."""
    for source in [Path("/etc/apt/sources.list.d/debian.sources"), Path("/etc/apt/sources.list")]:
        if source.exists():
            match = re.search(r"^(?:URIs:|deb)\s+(\S+/debian)\s", source.read_text(), re.M)
            if match:
                return match.group(1)
    pytest.fail("no Debian mirror in the host's apt sources")


def ensure_base_tarball() -> None:
    """Debootstrap a minimal bookworm server once; reruns extract the cached tarball."""
    if BASE_TARBALL.exists():
        return
    if not shutil.which("debootstrap"):
        run(
            ["apt-get", "install", "-y", "-qq", "debootstrap"],
            env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
        )
    BASE_CACHE.mkdir(parents=True, exist_ok=True)
    scratch = BASE_CACHE / "base.tmp"
    remove_tree(scratch)
    run(
        [
            "debootstrap",
            "--variant=minbase",
            "--include=" + SERVER_PACKAGES,
            "bookworm",
            str(scratch),
            debian_mirror(),
        ]
    )
    run(["tar", "-C", str(scratch), "-cf", f"{BASE_TARBALL}.part", "."])
    os.replace(f"{BASE_TARBALL}.part", BASE_TARBALL)
    remove_tree(scratch)


def remove_tree(path: Path) -> None:
    """Delete PATH without ever following a mount out of it (a root has the host's /dev bound in).

    Mounts left under PATH by an interrupted run are detached first (deepest first), and
    `rm --one-file-system` then refuses to descend into any that could not be.
    """
    prefix = str(path.resolve()) + "/"
    with open("/proc/self/mounts") as mounts:
        points = [line.split()[1] for line in mounts if line.split()[1].startswith(prefix)]
    for point in sorted(points, key=len, reverse=True):
        if subprocess.run(["umount", point], capture_output=True).returncode:
            subprocess.run(["umount", "-l", point], capture_output=True)
    subprocess.run(["rm", "-rf", "--one-file-system", str(path)], capture_output=True)


class Lab:
    """Roots, mounts, namespaces and processes of one run; close() undoes all of them."""

    def __init__(self):
        self.mounts: list[Path] = []
        self.namespaces: list[str] = []
        self.processes: list[subprocess.Popen] = []
        self.bridge = False

    def root(self, name: str) -> Path:
        return ROOTS / name

    def make_root(self, name: str, copy_of: str | None = None) -> Path:
        root = self.root(name)
        remove_tree(root)
        root.mkdir(parents=True)
        if copy_of:
            run(["cp", "-ax", f"{self.root(copy_of)}/.", str(root)])
        else:
            run(["tar", "-C", str(root), "-xf", str(BASE_TARBALL)])
        # Package scripts must not start daemons in the host's namespace (no systemd in a chroot).
        policy = root / "usr/sbin/policy-rc.d"
        policy.write_text("#!/bin/sh\nexit 101\n")
        policy.chmod(0o755)
        shutil.copy("/etc/resolv.conf", root / "etc/resolv.conf")
        # The host's trusted CAs (a network may intercept TLS with its own CA): pip on the node
        # fetches the pinned packages. Under local/ too, so update-ca-certificates keeps them.
        shutil.copy("/etc/ssl/certs/ca-certificates.crt", root / "etc/ssl/certs/ca-certificates.crt")
        shutil.copy("/etc/ssl/certs/ca-certificates.crt", root / "usr/local/share/ca-certificates/host.crt")
        for target, args in [
            ("proc", ["-t", "proc", "proc"]),
            ("dev", ["--bind", "/dev"]),
            ("dev/pts", ["--bind", "/dev/pts"]),
        ]:
            point = root / target
            point.mkdir(exist_ok=True)
            run(["mount", *args, str(point)])
            self.mounts.append(point)
        return root

    def network(self) -> None:
        run(["ip", "link", "add", BRIDGE, "type", "bridge"])
        self.bridge = True
        run(["ip", "link", "set", BRIDGE, "up"])
        for name, octet in [*((n, o) for n, (o, _) in SERVERS.items()), CLIENT]:
            ns, veth = f"trkd-{name}", f"vtrkd-{name}"[:15]
            run(["ip", "netns", "add", ns])
            self.namespaces.append(ns)
            run(["ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns])
            run(["ip", "link", "set", veth, "master", BRIDGE, "up"])
            run(["ip", "-n", ns, "addr", "add", f"{SUBNET}.{octet}/24", "dev", "eth0"])
            run(["ip", "-n", ns, "link", "set", "eth0", "up"])
            run(["ip", "-n", ns, "link", "set", "lo", "up"])

    def start(self, name: str, command: list[str], *, user: str | None = None, env=None, log: str):
        """Start a command chrooted into NAME's root, inside NAME's namespace."""
        root = self.root(name)
        chroot = ["chroot"] + ([f"--userspec={user}:{user}"] if user else []) + [str(root)]
        env_prefix = [
            "env",
            "-i",
            "PATH=/usr/sbin:/usr/bin:/sbin:/bin",
            "LANG=C.UTF-8",
            *[f"{k}={v}" for k, v in (env or {}).items()],
        ]
        log_file = open(ROOTS / f"{name}-{log}.log", "ab")
        process = subprocess.Popen(
            ["ip", "netns", "exec", f"trkd-{name}", *chroot, *env_prefix, *command],
            stdout=log_file,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        self.processes.append(process)
        return process

    def close(self) -> None:
        for process in reversed(self.processes):
            try:
                os.killpg(process.pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
        for process in self.processes:
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        for ns in self.namespaces:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        if self.bridge:
            subprocess.run(["ip", "link", "del", BRIDGE], capture_output=True)
        for point in reversed(self.mounts):
            if subprocess.run(["umount", str(point)], capture_output=True).returncode:
                subprocess.run(["umount", "-l", str(point)], capture_output=True)
        if os.environ.get("TRACKER_DEPLOY_KEEP") != "1":
            remove_tree(ROOTS)


def write_inventory(path: Path) -> None:
    hosts = {
        name: {
            "ansible_host": str(ROOTS / name),
            "ansible_connection": "community.general.chroot",
            "ansible_python_interpreter": "/usr/bin/python3",
            "private_ip": ip(name),
        }
        for name in SERVERS
    }
    children = {}
    for name, (_, groups) in SERVERS.items():
        for group in groups:
            children.setdefault(group, {"hosts": {}})["hosts"][name] = None
    inventory = {
        "all": {
            "hosts": hosts,
            "children": children,
            "vars": {
                "deploy_live": False,
                "redis_mode": "single",
                "tracker_workers": 2,
                "redis_maxmemory_mb": 256,
                # HAProxy refuses to start when it cannot get the file descriptors
                # maxconn needs (2 per connection); a test box may cap them lower
                # than a server (here 20000).
                "loadbalancer_maxconn": 4096,
            },
        }
    }
    path.write_text(json.dumps(inventory, indent=1))


def playbook(inventory: Path, limit: str, log: Path) -> str:
    env = {
        **os.environ,
        "ANSIBLE_CONFIG": str(ANSIBLE_DIR / "ansible.cfg"),
        "PATH": f"{VENV_BIN}:{os.environ['PATH']}",
        "ANSIBLE_FORCE_COLOR": "0",
    }
    result = subprocess.run(
        [str(VENV_BIN / "ansible-playbook"), "-i", str(inventory), "--limit", limit, "site.yml"],
        cwd=ANSIBLE_DIR,
        env=env,
        text=True,
        capture_output=True,
    )
    log.write_text(result.stdout + result.stderr)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
    return result.stdout


def unit_exec(root: Path, unit: str, instance: str = "") -> tuple[list[str], str | None, dict]:
    """The ExecStart, User and EnvironmentFile variables of a unit Ansible wrote."""
    text = (root / "etc/systemd/system" / unit).read_text()
    fields = dict(re.findall(r"^(\w+)=(.*)$", text, re.M))
    env = {}
    if "EnvironmentFile" in fields:
        env_text = (root / fields["EnvironmentFile"].lstrip("-/")).read_text()
        env = dict(re.findall(r"^([A-Z_]+)=(.*)$", env_text, re.M))
    return shlex.split(fields["ExecStart"].replace("%i", instance)), fields.get("User"), env


def in_client(*command, check=True, input_text=None):
    return run(["ip", "netns", "exec", f"trkd-{CLIENT[0]}", *command], check=check, input=input_text)


def haproxy_servers() -> dict[str, dict]:
    csv = in_client("curl", "-sf", f"http://{ip('lb')}:8404/stats;csv", check=False).stdout
    lines = [line for line in csv.splitlines() if line]
    if not lines:
        return {}
    header = lines[0].lstrip("# ").split(",")
    rows = [dict(zip(header, line.split(","))) for line in lines[1:]]
    return {
        row["svname"]: row
        for row in rows
        if row["pxname"] == "trackers" and row["svname"] not in ("FRONTEND", "BACKEND")
    }


def wait_for(predicate, what: str, timeout_s: float = 120, logs: tuple[str, ...] = ()):
    """Poll PREDICATE; on timeout fail with the tails of the named process logs (ROOTS/NAME.log)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.5)
    tails = "".join(f"\n--- {name}.log:\n" + log_tail(name) for name in logs)
    pytest.fail(f"timed out waiting for {what}{tails}")


def log_tail(name: str, chars: int = 3000) -> str:
    path = ROOTS / f"{name}.log"
    return path.read_text(errors="replace")[-chars:] if path.exists() else "(no log)"


def tracker_cli(lab: Lab, *args, stdin: str | None = None):
    command, _, env = unit_exec(lab.root("tracker1"), "tracker-api.service")
    tracker = command[0]
    return run(
        [
            "ip",
            "netns",
            "exec",
            "trkd-tracker1",
            "chroot",
            str(lab.root("tracker1")),
            "env",
            "LANG=C.UTF-8",
            f"TRACKER_REDIS_URL={env['TRACKER_REDIS_URL']}",
            tracker,
            *args,
        ],
        input=stdin,
    )


def run_locust(host: str, redis_url: str, workdir: Path) -> dict:
    """Run loadtest.runner.run_headless inside the client namespace; return its figures."""
    code = (
        "import json, sys\n"
        f"sys.path.insert(0, {str(REPO)!r})\n"
        "from loadtest.runner import run_headless\n"
        f"r = run_headless({host!r}, redis_url={redis_url!r}, project={LOCUST_PROJECT!r},"
        f" seed_items={LOCUST_ITEMS}, users={LOCUST_USERS}, run_time_s={LOCUST_SECONDS}, workers=2,"
        " multi='1-10', download_time='uniform:0.01,0.03', retry_delay_s=0.2, min_irsr=0.0,"
        f" workdir={str(workdir)!r})\n"
        "print('RESULT ' + json.dumps({k: r[k] for k in ('exit_code', 'passed', 'failures', 'accounting')}"
        " | {'counts': r['summary']['counts'], 'log': r['log'][-2000:]}))\n"
    )
    output = in_client(sys.executable, "-c", code).stdout
    lines = [line for line in output.splitlines() if line.startswith("RESULT ")]
    assert lines, output[-3000:]
    return json.loads(lines[-1][len("RESULT ") :])


def test_playbook_deploys_a_working_tracker_behind_haproxy(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root (debootstrap, chroot, network namespaces)")
    started = time.monotonic()
    ensure_base_tarball()
    lab = Lab()
    try:
        for name in ("redis1", "tracker1", "lb"):
            lab.make_root(name)
        inventory = tmp_path / "inventory.json"
        write_inventory(inventory)
        playbook(inventory, "redis1,tracker1,lb", ROOTS / "ansible-first.log")
        lab.make_root("tracker2", copy_of="tracker1")  # cp -x: the mounts are not copied
        second = playbook(inventory, "tracker2", ROOTS / "ansible-tracker2.log")
        assert re.search(r"tracker2\s*:\s*ok=\d+\s+changed=\d+\s+unreachable=0\s+failed=0", second)

        # What the playbook wrote, checked before anything runs.
        redis_root = lab.root("redis1")
        conf = (redis_root / "etc/redis/tracker-6379.conf").read_text()
        for line in [
            "appendonly yes",
            "appendfsync everysec",
            "auto-aof-rewrite-min-size 256mb",
            "maxmemory-policy noeviction",
            "tcp-backlog 4096",
            f"bind {ip('redis1')}",
            "maxmemory 256mb",
        ]:
            assert line in conf.splitlines(), line
        sysctl = (redis_root / "etc/sysctl.d/60-tracker-redis.conf").read_text()
        assert "vm.overcommit_memory = 1" in sysctl and "net.core.somaxconn = 4096" in sysctl
        assert (redis_root / "etc/systemd/system/multi-user.target.wants/disable-thp.service").is_symlink()
        haproxy_cfg = (lab.root("lb") / "etc/haproxy/haproxy.cfg").read_text()
        assert f"{ip('tracker1')}:8080" in haproxy_cfg and f"{ip('tracker2')}:8080" in haproxy_cfg
        # The health check's /metrics is refused on the public port; no request line with a
        # query string or a backfeed path (it holds the project's secret) is ever logged.
        assert "http-request deny" in haproxy_cfg and "metrics" in haproxy_cfg
        assert not re.search(r"%(\{[^}]*\})?r\b", haproxy_cfg) and "option httplog" not in haproxy_cfg
        assert "/backfeed/HIDDEN" in haproxy_cfg
        # Bodies, heads, upgrades and idle connections bounded before they reach bjoern (the
        # behaviour itself: the haproxy tests below, without root).
        for line in [
            "http-reuse never",
            "timeout http-request 10s",
            "tune.bufsize 65536",
            "proto h1",
            "maxconn 4096",
            "http-request wait-for-body time 10s",
        ]:
            assert line in haproxy_cfg, line
        assert (
            "deny status 413" in haproxy_cfg
            and "deny status 411" in haproxy_cfg
            and "deny status 414" in haproxy_cfg
        )
        # Redis's own settings are kept beside the running file Redis/Sentinel may rewrite.
        assert (redis_root / "etc/redis/tracker-6379.conf.ansible").exists()
        assert "protected-mode no" in conf.splitlines()
        wants = "etc/systemd/system/multi-user.target.wants"
        for node in ("tracker1", "tracker2"):
            _, _, env = unit_exec(lab.root(node), "tracker-api.service")
            assert env["TRACKER_REDIS_URL"] == f"redis://{ip('redis1')}:6379/0"
            assert env["TRACKER_LIVE_URL"] == "/live"  # the feed behind HAProxy's port 80
            # The repository's units as shipped (packaging/systemd/), logging to the journal.
            units = lab.root(node) / "etc/systemd/system"
            for unit in ("tracker-api.service", "tracker-live.service", "tracker-maintain.service"):
                assert (units / unit).read_text() == (REPO / "packaging/systemd" / unit).read_text()
            hardening = (units / "tracker-.service.d/10-hardening.conf").read_text()
            assert "StandardOutput=journal" in hardening and "ProtectSystem=strict" in hardening
            assert "LimitNOFILE=65536" in (units / "tracker-.service.d/20-node.conf").read_text()
            assert not (lab.root(node) / "etc/logrotate.d/tracker").exists()
            m_command, _, m_env = unit_exec(lab.root(node), "tracker-maintain.service")
            assert m_command[1:] == ["maintain"]
            assert (lab.root(node) / m_env["TRACKER_SEGMENTS_DIR"].lstrip("/")).is_dir()
        # The maintenance process runs on the first tracker node only (segments are local disk);
        # tracker2, a copy of tracker1's disk, had it switched off by the playbook.
        assert (lab.root("tracker1") / wants / "tracker-maintain.service").is_symlink()
        assert not (lab.root("tracker2") / wants / "tracker-maintain.service").exists()
        t2_command, _, t2_env = unit_exec(lab.root("tracker2"), "tracker-api.service")
        assert t2_command[1:] == ["serve"] and t2_env["TRACKER_SERVE_HOST"] == ip("tracker2")
        assert (
            t2_env["TRACKER_SERVE_IDLE_TIMEOUT_S"] == "30"
            and t2_env["TRACKER_SERVE_MAX_BODY_BYTES"] == "67174400"
        )

        lab.network()
        # The namespace's own kernel settings (net.* are per namespace; vm.* would be the host's).
        for line in sysctl.splitlines():
            if line.startswith("net."):
                key, value = (part.strip() for part in line.split("="))
                run(["ip", "netns", "exec", "trkd-redis1", "sysctl", "-qw", f"{key}={value}"])
        command, user, _ = unit_exec(redis_root, "redis-tracker@.service", "6379")
        lab.start("redis1", command, user=user, log="redis")
        wait_for(
            lambda: (
                run(
                    [
                        "ip",
                        "netns",
                        "exec",
                        "trkd-redis1",
                        "chroot",
                        str(redis_root),
                        "redis-cli",
                        "-h",
                        ip("redis1"),
                        "ping",
                    ],
                    check=False,
                ).stdout.strip()
                == "PONG"
            ),
            "Redis",
            logs=("redis1-redis",),
        )
        maintainers = {}
        for node in ("tracker1", "tracker2"):
            # The units the playbook enabled on this node, as systemd would start them at boot.
            for unit, log in [
                ("tracker-api.service", "api"),
                ("tracker-live.service", "live"),
                ("tracker-maintain.service", "maintain"),
            ]:
                if not (lab.root(node) / wants / unit).is_symlink():
                    continue
                command, user, env = unit_exec(lab.root(node), unit)
                process = lab.start(node, command, user=user, env=env, log=log)
                if log == "maintain":
                    maintainers[node] = process
        assert set(maintainers) == {"tracker1"}
        (lab.root("lb") / "run/haproxy").mkdir(parents=True, exist_ok=True)  # systemd's RuntimeDirectory
        lab.start("lb", ["/usr/sbin/haproxy", "-db", "-f", "/etc/haproxy/haproxy.cfg"], log="haproxy")
        wait_for(
            lambda: (s := haproxy_servers()) and all(r["status"] == "UP" for r in s.values()) and len(s) == 2,
            "both tracker nodes UP in HAProxy",
            logs=("lb-haproxy", "tracker1-api", "tracker2-api"),
        )
        # /metrics: refused through HAProxy in any spelling the nodes route, served on a node
        # (where the health checks, which keep both nodes UP, go).
        for path in ("/metrics", "//metrics/", "/%6detrics"):
            refused = in_client(
                "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", f"http://{ip('lb')}{path}"
            )
            assert refused.stdout == "403", (path, refused.stdout)
        assert (
            in_client("curl", "-sf", "-o", "/dev/null", f"http://{ip('tracker1')}:8080/metrics").returncode
            == 0
        )
        # A body past the claim limit is refused by HAProxy, an upgrade on a tracker path too.
        refused = in_client(
            "curl",
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "--data-binary",
            "@-",
            f"http://{ip('lb')}/{PROJECT}/request",
            input_text="x" * ((1 << 20) + 1),
        )
        assert refused.stdout == "413", refused.stdout
        upgrade = in_client(
            "curl",
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "-H",
            "Upgrade: websocket",
            "-H",
            "Connection: Upgrade",
            f"http://{ip('lb')}/{PROJECT}/request",
        )
        assert upgrade.stdout == "400", upgrade.stdout

        names = [f"deploy-item-{i:05d}" for i in range(ITEMS)]
        tracker_cli(lab, "project", "create", PROJECT)
        added = json.loads(
            tracker_cli(lab, "items", "add", PROJECT, "-", "--json", stdin="\n".join(names) + "\n").stdout
        )
        assert added == {"added": ITEMS, "duplicates": 0}

        claims = ITEMS // (WARRIORS * MULTI)
        warriors = []
        for number in range(WARRIORS):
            work_dir = tmp_path / f"warrior-{number}"
            work_dir.mkdir()
            warriors.append(
                subprocess.Popen(
                    [
                        "ip",
                        "netns",
                        "exec",
                        f"trkd-{CLIENT[0]}",
                        sys.executable,
                        str(DRIVER),
                        "--tracker",
                        f"http://{ip('lb')}",
                        "--project",
                        PROJECT,
                        "--downloader",
                        f"deploy-w{number}",
                        "--multi",
                        str(MULTI),
                        "--claims",
                        str(claims),
                        "--work-dir",
                        str(work_dir),
                    ],
                    cwd=work_dir,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    text=True,
                )
            )
        for process in warriors:
            output, _ = process.communicate(timeout=600)
            assert process.returncode == 0, output[-4000:]
            assert any(line.startswith("RESULT ") for line in output.splitlines()), output[-4000:]

        status = json.loads(tracker_cli(lab, "status", PROJECT, "--json").stdout)
        assert status["done"] == ITEMS, status
        assert status["out"] == 0 and status["todo_total"] == 0, status
        # The live page finds its feed where TRACKER_LIVE_URL says, through HAProxy's port 80.
        page = in_client("curl", "-sf", f"http://{ip('lb')}/{PROJECT}").stdout
        assert '<meta name="tracker-live-url" content="/live">' in page
        feed = in_client(
            sys.executable,
            "-c",
            (
                "import json\nfrom websockets.sync.client import connect\n"
                f"with connect('ws://{ip('lb')}/live/{PROJECT}', open_timeout=10) as ws:\n"
                "    print(json.loads(ws.recv(timeout=10))['type'])\n"
            ),
        ).stdout
        assert feed.strip() == "log", feed
        # The Locust warriors, distributed (a master and two workers) in the client namespace,
        # seed a second project straight into the deployed Redis and work it through HAProxy.
        locust = run_locust(f"http://{ip('lb')}", f"redis://{ip('redis1')}:6379/0", tmp_path / "locust")
        assert locust["exit_code"] == 0 and locust["passed"], locust
        assert locust["accounting"]["ok"], locust["accounting"]
        assert locust["counts"]["server_5xx"] == 0 and locust["counts"]["transport_errors"] == 0
        locust_status = json.loads(tracker_cli(lab, "status", LOCUST_PROJECT, "--json").stdout)
        assert locust_status["done"] == LOCUST_ITEMS, locust_status

        # The maintenance process ran all along (it exits only on an error; systemd would
        # restart it, hiding the failure).
        assert maintainers["tracker1"].poll() is None, log_tail("tracker1-maintain")
        assert "Traceback" not in log_tail("tracker1-maintain", 100_000), log_tail("tracker1-maintain")
        servers = haproxy_servers()
        # Both nodes answered warriors (leastconn spreads two warriors' connections).
        assert set(servers) == {"tracker1", "tracker2"}
        assert all(int(row["stot"]) > 0 for row in servers.values()), servers
        duration = time.monotonic() - started
        LAST_RUN.write_text(
            "# Last run of the deployment test\n\n"
            f"- date: {datetime.now(UTC):%Y-%m-%d %H:%M UTC}\n"
            f"- command: `make deploy-test`\n"
            f"- duration: {duration:.0f} s (base root cached: see /var/cache/tracker-deploy)\n"
            f"- servers: redis, tracker1, tracker2 (2 bjoern workers each; tracker1 also runs "
            f"`tracker maintain`), HAProxy, in network namespaces\n"
            f"- HAProxy: /metrics refused on port 80 (403), live feed reached at ws://LB/live/{PROJECT}\n"
            f"- items done through HAProxy: {status['done']} of {ITEMS} "
            f"({WARRIORS} seesaw-kit warriors, multi={MULTI})\n"
            f"- requests per node (HAProxy stot): "
            + ", ".join(f"{name} {row['stot']}" for name, row in sorted(servers.items()))
            + "\n"
            f"- Locust (master + 2 workers, {LOCUST_USERS} users, {LOCUST_SECONDS} s): "
            f"{locust_status['done']} of {LOCUST_ITEMS} items done, "
            f"{locust['counts']['items_claimed']} claimed, 5xx {locust['counts']['server_5xx']}\n"
        )
    finally:
        lab.close()


# -- The load balancer's configuration, without root ---------------------------------------------
# Rendered with Ansible from the roles' defaults, checked by `haproxy -c`, then run in front of a
# real node (tracker serve with the flags of the unit the tracker role writes) on loopback. They
# need haproxy and redis-server, not root: TRACKER_DEPLOY_TEST=1 pytest tests/deploy -k haproxy.

ROLES = ANSIBLE_DIR / "roles"
BJOERN_HEAD_LIMIT = 80 * 1024  # http-parser's HTTP_MAX_HEADER_SIZE: bjoern's bare 400 past it


def role_defaults(role: str) -> dict:
    import yaml

    return yaml.safe_load((ROLES / role / "defaults" / "main.yml").read_text())


def render_roles(out: Path, **overrides) -> tuple[str, dict[str, str]]:
    """haproxy.cfg and the units' environment file (tracker.env), rendered by Ansible from the
    roles' defaults (OVERRIDES as extra vars) for a load balancer with one tracker node at 127.0.0.1."""
    if not (VENV_BIN / "ansible-playbook").exists():
        pytest.skip("ansible not installed (pip install -r requirements-deploy.txt)")
    out.mkdir(parents=True, exist_ok=True)
    local = {
        "ansible_connection": "local",
        "ansible_python_interpreter": sys.executable,
        "private_ip": "127.0.0.1",
    }
    (out / "inventory.json").write_text(
        json.dumps(
            {
                "all": {
                    "hosts": {"lb": local, "node": local},
                    "children": {
                        "loadbalancer": {"hosts": {"lb": None}},
                        "tracker": {"hosts": {"node": None}},
                    },
                }
            }
        )
    )
    plays = [
        {
            "hosts": host,
            "gather_facts": False,
            "vars_files": [str(ROLES / role / "defaults/main.yml")],
            "tasks": [
                {
                    "name": "render",
                    "ansible.builtin.template": {
                        "src": str(ROLES / role / "templates" / template),
                        "dest": str(out / template.removesuffix(".j2")),
                        "mode": "0644",
                    },
                }
            ],
        }
        for host, role, template in [
            ("lb", "loadbalancer", "haproxy.cfg.j2"),
            ("node", "tracker", "tracker.env.j2"),
        ]
    ]
    (out / "render.yml").write_text(json.dumps(plays))
    # No redis group in this inventory: the URL the environment file carries is given.
    (out / "extra.json").write_text(
        json.dumps({"tracker_redis_url": "redis://127.0.0.1:6379/0", **overrides})
    )
    env = {
        **os.environ,
        "ANSIBLE_CONFIG": str(ANSIBLE_DIR / "ansible.cfg"),
        "PATH": f"{VENV_BIN}:{os.environ['PATH']}",
    }
    run(
        [
            str(VENV_BIN / "ansible-playbook"),
            "-i",
            str(out / "inventory.json"),
            "-e",
            f"@{out / 'extra.json'}",
            str(out / "render.yml"),
        ],
        cwd=ANSIBLE_DIR,
        env=env,
    )
    env = dict(re.findall(r"^([A-Z_]+)=(.*)$", (out / "tracker.env").read_text(), re.M))
    return (out / "haproxy.cfg").read_text(), env


def haproxy_check(path: Path) -> subprocess.CompletedProcess:
    if not shutil.which("haproxy"):
        pytest.skip("haproxy not installed (apt-get install haproxy)")
    return run(["haproxy", "-c", "-f", str(path)], check=False)


def test_haproxy_config_is_valid_and_its_limits_match_the_app_and_the_nodes(tmp_path):
    import inspect

    from tracker_api import admin_api, admin_pages, backfeed, warrior
    from tracker_core.rawredis import RawRedis

    cfg, node_env = render_roles(tmp_path)
    checked = haproxy_check(tmp_path / "haproxy.cfg")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    lb, node = role_defaults("loadbalancer"), role_defaults("tracker")
    # Each path's cap is the app's own limit for it: the same bytes pass, one more is refused.
    assert lb["loadbalancer_max_body_bytes"] == warrior.MAX_BODY_BYTES == admin_api.MAX_JSON_BYTES
    assert lb["loadbalancer_max_done_body_bytes"] == warrior.MAX_DONE_BODY_BYTES
    assert lb["loadbalancer_max_backfeed_body_bytes"] == backfeed.MAX_BODY_BYTES
    assert lb["loadbalancer_max_admin_upload_bytes"] == admin_api.MAX_UPLOAD_BYTES
    assert lb["loadbalancer_max_admin_form_bytes"] == admin_pages.MAX_FORM_BYTES
    caps = [
        lb[f"loadbalancer_max_{kind}_bytes"]
        for kind in ("body", "done_body", "backfeed_body", "admin_upload", "admin_form")
    ]
    # The node buffers whatever HAProxy lets through (its own cap is a backstop, never stricter).
    assert int(node_env["TRACKER_SERVE_MAX_BODY_BYTES"]) >= max(caps)
    # A connection to a node is idle at most HAProxy's keep-alive or request timeout (http-reuse
    # never): both below the node's idle timeout, so the node never closes one HAProxy sends on.
    seconds = {
        key: int(str(value).rstrip("s"))
        for key, value in lb.items()
        if key
        in (
            "loadbalancer_timeout_http_keep_alive",
            "loadbalancer_timeout_http_request",
            "loadbalancer_timeout_server",
            "loadbalancer_timeout_client",
        )
    }
    assert "http-reuse never" in cfg
    assert max(
        seconds["loadbalancer_timeout_http_keep_alive"], seconds["loadbalancer_timeout_http_request"]
    ) < float(node_env["TRACKER_SERVE_IDLE_TIMEOUT_S"])
    # Waiting for a node outlasts its Redis timeout (the node answers a stalled Redis itself).
    assert (
        seconds["loadbalancer_timeout_server"] >= inspect.signature(RawRedis).parameters["timeout_s"].default
    )
    # Every head HAProxy passes on fits bjoern's; the 414/431 checks fit HAProxy's buffer.
    room = lb["loadbalancer_bufsize"] - lb["loadbalancer_maxrewrite"]
    assert room + 1024 < BJOERN_HEAD_LIMIT
    assert lb["loadbalancer_max_url_bytes"] < lb["loadbalancer_max_head_bytes"] < room
    # The longest item status URL: a 4,096-character name of 4-byte characters, percent-encoded.
    assert (
        len(f"/{'p' * 100}/items/{'%F0%9F%98%80' * warrior.MAX_ITEM_CHARS}.json")
        <= lb["loadbalancer_max_url_bytes"]
    )
    # Requests in flight per node stay below one worker's descriptor limit, less what its guard keeps free.
    nofile = node["tracker_nofile"]
    assert lb["loadbalancer_server_maxconn"] < nofile - min(1024, nofile // 8)
    assert (
        f"maxconn {lb['loadbalancer_server_maxconn']}" in cfg
        and f"maxconn {lb['loadbalancer_maxconn']}" in cfg
    )
    for line in [
        "timeout http-request 10s",
        "timeout http-keep-alive 10s",
        "timeout client 30s",
        "timeout server 30s",
        "tune.bufsize 65536",
        "tune.http.maxhdr 101",
        "proto h1",
    ]:
        assert line in cfg, line
    # The done-sized cap covers exactly the routes that take done bodies, as the nodes route them.
    done = re.compile(lb["loadbalancer_done_paths_regex"])
    for path in [
        "/p/done",
        "/p/done+request",
        "/p/release",
        "/p/multi=1000/done",
        "/p/multi=5//done+request",
        "//p//done/",
        "/p/multi=1000/done+request/",
    ]:
        assert done.search(path), path
    for path in [
        "/p/request",
        "/p/multi=5/request",
        "/p/upload",
        "/p/uploaded",
        "/p/multi=5/release",
        "/p/done/x",
        "/p/items/done",
        "/backfeed/legacy/p-x",
        "/p",
    ]:
        assert not done.search(path), path


class Probe:
    """Raw HTTP/1.1 exchanges with the load balancer: what answered (HAProxy or a node) and how."""

    def __init__(self, port: int):
        self.port = port

    def send(self, raw: bytes, body: bytes = b"", timeout_s: float = 15.0) -> dict:
        import socket

        sock = socket.create_connection(("127.0.0.1", self.port))
        sock.settimeout(timeout_s)
        error = None
        try:
            sock.sendall(raw)
            for at in range(0, len(body), 1 << 16):
                sock.sendall(body[at : at + (1 << 16)])
        except OSError as exc:  # HAProxy refused and closed while the body was on its way
            error = exc
        data, started = b"", time.monotonic()
        try:
            while True:
                chunk = sock.recv(1 << 16)
                if not chunk:
                    break
                data += chunk
                head, _, rest = data.partition(b"\r\n\r\n")
                length = re.search(rb"(?im)^content-length:\s*(\d+)", head)
                if (
                    rest is not None
                    and length
                    and len(rest) >= int(length.group(1))
                    and not head.startswith(b"HTTP/1.1 1")
                ):
                    break
        except OSError as exc:
            error = exc
        finally:
            sock.close()
        head, _, text = data.partition(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1]) if head.startswith(b"HTTP/") else None
        # Every answer of the app carries nosniff (its security headers); HAProxy's own do not.
        return {
            "status": status,
            "by": "node" if b"x-content-type-options" in head.lower() else "lb",
            "text": text.decode("utf-8", "replace"),
            "error": error,
            "seconds": time.monotonic() - started,
        }

    def request(self, method: str, path: str, body: bytes = b"", headers: tuple = (), **kwargs) -> dict:
        lines = [f"{method} {path} HTTP/1.1", "Host: tracker.example", *headers]
        if body and not any(h.lower().startswith(("content-length:", "transfer-encoding:")) for h in headers):
            lines.append(f"Content-Length: {len(body)}")
        return self.send(("\r\n".join(lines) + "\r\n\r\n").encode(), body, **kwargs)

    def head_only(self, path: str, length: int, headers: tuple = ()) -> dict:
        """A POST announcing LENGTH bytes with Expect: 100-continue: 100 if HAProxy takes it."""
        return self.request(
            "POST", path, headers=(f"Content-Length: {length}", "Expect: 100-continue", *headers), timeout_s=3
        )


def json_body(size: int, **fields) -> bytes:
    """A JSON object of exactly SIZE bytes: FIELDS plus padding."""
    start = json.dumps({**fields, "pad": ""})[:-2].encode()
    return start + b"x" * (size - len(start) - 2) + b'"}'


@pytest.fixture
def balanced_node(tmp_path, redis_url):
    """HAProxy (the role's configuration) in front of one node (the role's environment file) and its feed."""
    from tracker_core.embedded import free_port

    if not shutil.which("haproxy"):
        pytest.skip("haproxy not installed (apt-get install haproxy)")
    ports = {name: free_port() for name in ("lb", "api", "live", "stats")}
    cfg, node_env = render_roles(
        tmp_path / "render",
        loadbalancer_port=ports["lb"],
        loadbalancer_backend_port=ports["api"],
        loadbalancer_live_port=ports["live"],
        loadbalancer_stats_port=ports["stats"],
        loadbalancer_maxconn=2000,
        loadbalancer_stats_socket=str(tmp_path / "haproxy.sock"),
        loadbalancer_timeout_http_request="2s",
        tracker_live_url="/live",
    )
    tracker = str(VENV_BIN / "tracker")
    # The shipped unit's command; its settings are the role's environment file, this box's
    # address, port and worker count aside.
    serve = [tracker, "serve"]
    env = {
        **os.environ,
        **node_env,
        "TRACKER_REDIS_URL": redis_url,
        "TRACKER_SERVE_HOST": "127.0.0.1",
        "TRACKER_SERVE_PORT": str(ports["api"]),
        "TRACKER_SERVE_WORKERS": "2",
        "TRACKER_SEGMENTS_DIR": str(tmp_path / "segments"),
    }
    logs = open(tmp_path / "processes.log", "ab")
    processes = [
        subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=logs, stderr=subprocess.STDOUT)
        for argv in (
            serve,
            [tracker, "live", "--host", "127.0.0.1", "--port", str(ports["live"])],
            ["haproxy", "-db", "-f", str(tmp_path / "render" / "haproxy.cfg")],
        )
    ]
    try:

        def cli(*args):
            return json.loads(
                run([tracker, "--redis-url", redis_url, *args, "--json"], env=env).stdout.strip() or "null"
            )

        run([tracker, "--redis-url", redis_url, "project", "create", "lbproj"], env=env)
        names = [f"https://example.com/a b/{i}?q=%25&x=#frag" for i in range(50)]
        run(
            [tracker, "--redis-url", redis_url, "items", "add", "lbproj", "-"],
            env=env,
            input="\n".join(names) + "\n",
        )
        secret = cli("backfeed", "secret", "create", "lbproj")["path"]
        token = cli("admin", "token", "create", "--note", "lb test")["token"]
        probe = Probe(ports["lb"])
        for port in (ports["api"], ports["live"], ports["lb"]):
            wait_for(
                lambda port=port: run(["ss", "-tlnH", f"sport = :{port}"]).stdout.strip(),
                f"a listener on {port}",
                30,
            )
        wait_for(
            lambda: probe.request("GET", "/projects.json")["status"] == 200, "the node behind HAProxy", 30
        )
        yield {"probe": probe, "backfeed": secret, "token": token, "api_port": ports["api"], "cfg": cfg}
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        logs.close()


def test_haproxy_caps_bodies_at_the_apps_limits_before_reading_them(balanced_node):
    from tracker_api import admin_api, admin_pages, backfeed, warrior

    probe = balanced_node["probe"]
    claim = {"downloader": "lbwarrior", "api_version": "2", "version": "1"}
    for path, limit in [
        ("/lbproj/request", warrior.MAX_BODY_BYTES),
        ("/lbproj/upload", warrior.MAX_BODY_BYTES),
        ("/lbproj/done", warrior.MAX_DONE_BODY_BYTES),
        ("/lbproj/multi=1000//done+request", warrior.MAX_DONE_BODY_BYTES),
        ("/lbproj/release", warrior.MAX_DONE_BODY_BYTES),
    ]:
        at = probe.request(
            "POST", path, json_body(limit, **claim, item="https://example.com/a b/0?q=%25&x=#frag")
        )
        assert at["by"] == "node" and at["status"] != 413, (path, at)
        past = probe.request("POST", path, json_body(limit + 1, **claim))
        assert (past["status"], past["by"]) == (413, "lb"), (path, past)
        assert f"limit {limit} bytes" in past["text"]
    # A done-sized body on a path that takes only a claim's is refused by HAProxy.
    assert (
        probe.request("POST", "/lbproj/multi=5/release", json_body(warrior.MAX_BODY_BYTES + 1))["status"]
        == 413
    )
    entries = b"\0".join(f"https://example.com/bf {i}?%".encode() for i in range(20))
    at = probe.request("POST", balanced_node["backfeed"], entries.ljust(backfeed.MAX_BODY_BYTES, b"z"))
    assert at["by"] == "node", at
    past = probe.request("POST", balanced_node["backfeed"], entries.ljust(backfeed.MAX_BODY_BYTES + 1, b"z"))
    assert (past["status"], past["by"]) == (413, "lb"), past
    # Refused on the announced length alone, so "Expect: 100-continue" gets 413, never 100.
    bearer = (f"Authorization: Bearer {balanced_node['token']}",)
    for path, limit, headers in [
        ("/lbproj/done", warrior.MAX_DONE_BODY_BYTES, ()),
        ("/lbproj/d%6Fne", warrior.MAX_DONE_BODY_BYTES, ()),  # the node decodes it
        ("/api/admin/projects/lbproj/items", admin_api.MAX_UPLOAD_BYTES, bearer),
        ("/admin/lbproj/items", admin_pages.MAX_FORM_BYTES, ()),
    ]:
        assert probe.head_only(path, limit, headers)["status"] == 100, path
        assert probe.head_only(path, limit + 1, headers)["status"] == 413, path
    # Without a token, an admin body past the JSON limit is refused as the node would (401), unread.
    anonymous = probe.head_only("/api/admin/projects/lbproj/items", admin_api.MAX_JSON_BYTES + 1)
    assert (anonymous["status"], anonymous["by"]) == (401, "lb"), anonymous
    # The nodes read a body by its Content-Length only: a chunked one is sent back with a reason.
    chunked = probe.request(
        "POST", "/lbproj/done", b"5\r\nhello\r\n0\r\n\r\n", ("Transfer-Encoding: chunked",)
    )
    assert (chunked["status"], chunked["by"]) == (411, "lb") and "Content-Length" in chunked["text"], chunked
    stalled = probe.request("POST", "/lbproj/done", headers=("Content-Length: 100",))  # promised, never sent
    assert (stalled["status"], stalled["by"]) == (408, "lb") and stalled["seconds"] < 5, stalled


def test_haproxy_answers_oversized_heads_upgrades_and_stalls_and_closes(balanced_node):
    from urllib.parse import quote

    from tracker_api import warrior

    probe = balanced_node["probe"]
    lb = role_defaults("loadbalancer")
    # The longest item name there is, percent-encoded: its status is served. (No "/" in it: the
    # node decodes %2F before routing, so a name with one has no status URL at all.)
    name = ("https:example.com?q=%25&x=#a b" + "é" * warrior.MAX_ITEM_CHARS)[: warrior.MAX_ITEM_CHARS]
    status = probe.request("GET", f"/lbproj/items/{quote(name, safe='')}.json")
    assert (status["status"], status["by"]) == (200, "node"), status
    prefix = "/lbproj/items/"
    at = probe.request("GET", prefix + "u" * (lb["loadbalancer_max_url_bytes"] - len(prefix)))
    assert at["by"] == "node", at
    past = probe.request("GET", prefix + "u" * (lb["loadbalancer_max_url_bytes"] + 1 - len(prefix)))
    assert (past["status"], past["by"]) == (414, "lb"), past
    big = probe.request(
        "GET", "/projects.json", headers=(f"X-Big: {'h' * lb['loadbalancer_max_head_bytes']}",)
    )
    assert (big["status"], big["by"]) == (431, "lb"), big
    # Past HAProxy's buffer: its own 400, answered (never a reset) and closed; bjoern never sees it.
    for path, headers in [
        ("/" + "p" * 200_000, ()),
        ("/projects.json", (f"X-Big: {'h' * 1_000_000}",)),
        ("/projects.json", tuple(f"X-H{i}: 1" for i in range(lb["loadbalancer_maxhdr"]))),
    ]:
        answer = probe.request("GET", path, headers=headers)
        assert (answer["status"], answer["by"]) == (400, "lb"), (len(path), answer)
    # Upgrades: a websocket under the live path reaches the feed; anything else is refused.
    websocket = (
        "Upgrade: websocket",
        "Connection: Upgrade",
        "Sec-WebSocket-Version: 13",
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
    )
    assert probe.request("GET", "/live/lbproj", headers=websocket, timeout_s=3)["status"] == 101
    for path, headers in [
        ("/lbproj/request", websocket),
        ("/", websocket),
        ("/lbproj/request", ("Upgrade: h2c", "Connection: Upgrade, HTTP2-Settings", "HTTP2-Settings: AAMA")),
        ("/live/lbproj", ("Upgrade: h2c", "Connection: Upgrade")),
    ]:
        answer = probe.request("GET", path, headers=headers)
        assert (answer["status"], answer["by"]) == (400, "lb"), (path, headers, answer)
    assert probe.send(b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n")["status"] == 405
    assert probe.send(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")["status"] == 400  # HTTP/1 only
    # A head never finished, or only blank lines: 408 after timeout http-request (2 s here).
    for raw in [b"GET /projects.json HTTP/1.1\r\nHost: x\r\n", b"\r\n" * 1000]:
        answer = probe.send(raw)
        assert (answer["status"], answer["by"]) == (408, "lb") and answer["seconds"] < 5, answer
    assert probe.request("GET", "/metrics")["status"] == probe.request("GET", "//Metrics/")["status"] == 403


def test_haproxy_closes_a_nodes_connection_with_its_clients(balanced_node):
    """http-reuse never: no connection to a node outlives its client's, so none sits idle past
    HAProxy's keep-alive timeout, below the node's --idle-timeout."""
    import socket

    api_port = balanced_node["api_port"]

    def to_node() -> int:
        out = run(["ss", "-tnH", "state", "established", "dst", f"127.0.0.1:{api_port}"]).stdout
        return sum(1 for line in out.splitlines() if line.strip())

    wait_for(lambda: to_node() == 0, "health checks' connections to close", 10)
    clients = []
    for _ in range(5):
        sock = socket.create_connection(("127.0.0.1", balanced_node["probe"].port))
        sock.sendall(b"GET /projects.json HTTP/1.1\r\nHost: x\r\n\r\n")
        assert sock.recv(1 << 16).startswith(b"HTTP/1.1 200")
        clients.append(sock)
    assert to_node() >= 1
    for sock in clients:
        sock.close()
    wait_for(lambda: to_node() == 0, "connections to the node to close with their clients", 5)
