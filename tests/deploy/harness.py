"""The deployment test's harness: throwaway Debian roots, network namespaces on a private bridge,
the playbook over Ansible's chroot connection, and the commands of the units it wrote.

Each "server" is a Debian root made by debootstrap (the base cached as a tarball), provisioned by
ansible/site.yml over the chroot connection, then run in its own network namespace on one bridge
(SUBNET), with the commands of the systemd units Ansible wrote (a chroot has no systemd). The
client namespace holds the warriors. Needs root.
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
import threading
import time
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
# name -> (last octet, inventory groups). Copies are re-provisioned: redis2 and redis3 start
# from redis1's root, tracker2 from tracker1's.
SERVERS = {
    "redis1": (11, ["redis"]),
    "redis2": (12, ["redis"]),
    "redis3": (13, ["redis"]),
    "tracker1": (21, ["tracker"]),
    "tracker2": (22, ["tracker"]),
    "lb": (31, ["loadbalancer"]),
}
REDIS_HOSTS = ("redis1", "redis2", "redis3")
# Each Redis host's instances (ansible/inventories/cluster): a primary and another host's replica.
REDIS_PORTS = (6379, 6380)
CLIENT = ("client", 99)
# The wrapper Ansible's chroot connection runs instead of chroot once the servers are up: the
# same chroot, inside the server's own network namespace (named after its root's directory), so
# that a task reaches the other servers on the bridge as it would on a real host.
NETNS_CHROOT = '#!/bin/sh\nexec ip netns exec "trkd-$(basename "$1")" chroot "$@"\n'


def run(command, *, check=True, **kwargs):
    """Run a command, failing the test with its output when it fails."""
    result = subprocess.run(command, text=True, capture_output=True, **kwargs)
    if check and result.returncode != 0:
        pytest.fail(
            f"{command!r} failed ({result.returncode}):\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
        )
    return result


def ip(name: str) -> str:
    return f"{SUBNET}.{SERVERS[name][0]}"


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
        """Start a command chrooted into NAME's root, inside NAME's namespace.

        ip netns exec, chroot and env each exec the next, so the process's pid is the command's
        own (what a SIGKILL must reach)."""
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

    def in_server(self, name: str, *command, env=None, check=True):
        """Run COMMAND chrooted into NAME's root, inside its namespace (the server's own tools)."""
        prefix = ["env", *[f"{k}={v}" for k, v in (env or {}).items()]]
        return run(
            ["ip", "netns", "exec", f"trkd-{name}", "chroot", str(self.root(name)), *prefix, *command],
            check=check,
        )

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


def write_inventory(path: Path, password_file: Path) -> None:
    """The servers as an inventory: ansible/inventories/cluster's layout and settings, with the
    roots as hosts (chroot connection) and sizes fit for a test box."""
    import yaml

    cluster_vars = yaml.safe_load((ANSIBLE_DIR / "inventories/cluster/group_vars/all.yml").read_text())
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
                **cluster_vars,
                # The cluster inventory's way (a password lookup: made once, then read), in a
                # file of this run's.
                "redis_password": cluster_vars["redis_password"].replace(
                    "inventory_dir ~ '/credentials/redis-password'", repr(str(password_file))
                ),
                "deploy_live": False,
                "tracker_workers": 2,
                "redis_maxmemory_mb": 256,
                # HAProxy refuses to start when it cannot get the file descriptors
                # maxconn needs (2 per connection); a test box may cap them lower
                # than a server (here 20000).
                "loadbalancer_maxconn": 4096,
                # The tree shipped to the tracker nodes: this checkout's working tree, or
                # TRACKER_DEPLOY_SOURCE (a snapshot, e.g. `git archive HEAD`, while others edit).
                **(
                    {"tracker_source_dir": os.environ["TRACKER_DEPLOY_SOURCE"]}
                    if os.environ.get("TRACKER_DEPLOY_SOURCE")
                    else {}
                ),
            },
        }
    }
    assert inventory["all"]["vars"]["redis_password"] != cluster_vars["redis_password"]
    path.write_text(json.dumps(inventory, indent=1))


def playbook(inventory: Path, limit: str, log: Path, extra_vars: dict | None = None, tags: str = "") -> str:
    env = {
        **os.environ,
        "ANSIBLE_CONFIG": str(ANSIBLE_DIR / "ansible.cfg"),
        "PATH": f"{VENV_BIN}:{os.environ['PATH']}",
        "ANSIBLE_FORCE_COLOR": "0",
        "ANSIBLE_GATHERING": "smart",  # facts once per host and run, not once per play
    }
    extra = (["-e", json.dumps(extra_vars)] if extra_vars else []) + (["--tags", tags] if tags else [])
    result = subprocess.run(
        [str(VENV_BIN / "ansible-playbook"), "-i", str(inventory), "--limit", limit, *extra, "site.yml"],
        cwd=ANSIBLE_DIR,
        env=env,
        text=True,
        capture_output=True,
    )
    log.write_text(result.stdout + result.stderr)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
    return result.stdout


def recap(output: str) -> dict[str, dict[str, int]]:
    """PLAY RECAP of a playbook's output: host -> {ok, changed, unreachable, failed, ...}."""
    table = {}
    for host, fields in re.findall(r"^(\S+)\s*:\s*(ok=.*)$", output, re.M):
        table[host] = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", fields)}
    return table


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


def haproxy_rows() -> list[dict]:
    csv = in_client("curl", "-sf", "-m", "5", f"http://{ip('lb')}:8404/stats;csv", check=False).stdout
    lines = [line for line in csv.splitlines() if line]
    if not lines:
        return []
    header = lines[0].lstrip("# ").split(",")
    return [dict(zip(header, line.split(","))) for line in lines[1:]]


def haproxy_servers() -> dict[str, dict]:
    return {
        row["svname"]: row
        for row in haproxy_rows()
        if row["pxname"] == "trackers" and row["svname"] not in ("FRONTEND", "BACKEND")
    }


class TrafficSampler:
    """HAProxy's warriors frontend sampled once a second in a thread: (time, requests answered,
    5xx answered), every answer through the load balancer whoever sent the request."""

    def __init__(self):
        self.samples: list[tuple[float, int, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self):
        while not self._stop.is_set():
            at = time.time()
            for row in haproxy_rows():
                if row["pxname"] == "warriors" and row["svname"] == "FRONTEND":
                    answered = sum(int(row[f"hrsp_{k}xx"] or 0) for k in range(1, 6))
                    self.samples.append((at, answered, int(row["hrsp_5xx"] or 0)))
            self._stop.wait(max(0.0, 1.0 - (time.time() - at)))

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(timeout=10)

    def _at(self, moment: float) -> tuple[float, int, int]:
        """The last sample taken at or before MOMENT (the first one, if none was)."""
        taken = [s for s in self.samples if s[0] <= moment]
        return taken[-1] if taken else self.samples[0]

    def between(self, start: float, end: float) -> tuple[int, int, float]:
        """Answers, 5xx among them, and seconds spanned, from the last sample at or before START
        to the last at or before END: consecutive spans count each answer once."""
        if not self.samples:
            return 0, 0, 0.0
        first, last = self._at(start), self._at(end)
        return last[1] - first[1], last[2] - first[2], last[0] - first[0]

    def slowest_second(self, start: float, end: float) -> int:
        """The fewest answers between two consecutive samples from START to END, per second."""
        inside = [s for s in self.samples if start - 0.5 <= s[0] <= end + 0.5]
        rates = [(b[1] - a[1]) / (b[0] - a[0]) for a, b in zip(inside, inside[1:]) if b[0] > a[0]]
        return round(min(rates)) if rates else 0

    def windows(self, start: float, end: float, width_s: float) -> list[dict]:
        rows, at = [], start
        while at + width_s <= end + 0.5:
            answered, errors, span = self.between(at, at + width_s)
            rows.append(
                {
                    "from_s": round(at - start),
                    "req_per_s": round(answered / span) if span else 0,
                    "5xx": errors,
                }
            )
            at += width_s
        return rows


def wait_for(predicate, what: str, timeout_s: float = 120, logs: tuple[str, ...] = (), every_s=0.5):
    """Poll PREDICATE; on timeout fail with the tails of the named process logs (ROOTS/NAME.log)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every_s)
    tails = "".join(f"\n--- {name}.log:\n" + log_tail(name) for name in logs)
    pytest.fail(f"timed out waiting for {what}{tails}")


def log_tail(name: str, chars: int = 3000) -> str:
    path = ROOTS / f"{name}.log"
    return path.read_text(errors="replace")[-chars:] if path.exists() else "(no log)"


def tracker_cli(lab: Lab, *args, stdin: str | None = None, node: str = "tracker1", check=True):
    """The deployed tracker's CLI on NODE, with the URL of its units' environment file."""
    command, _, env = unit_exec(lab.root(node), "tracker-api.service")
    return run(
        [
            "ip",
            "netns",
            "exec",
            f"trkd-{node}",
            "chroot",
            str(lab.root(node)),
            "env",
            "LANG=C.UTF-8",
            f"TRACKER_REDIS_URL={env['TRACKER_REDIS_URL']}",
            f"TRACKER_SEGMENTS_DIR={env['TRACKER_SEGMENTS_DIR']}",
            command[0],
            *args,
        ],
        input=stdin,
        check=check,
    )


def deployed_python(lab: Lab, code: str, *args, node: str = "tracker1") -> str:
    """Run CODE with the tracker's own Python on NODE (its virtualenv, its units' environment)."""
    command, _, env = unit_exec(lab.root(node), "tracker-api.service")
    python = str(Path(command[0]).with_name("python"))
    return lab.in_server(node, python, "-c", code, *args, env=env).stdout


def start_locust(host: str, workdir: Path, project: str, users: int, seconds: int, workers: int = 2):
    """Start loadtest.runner.run_headless in the client namespace (a master and WORKERS workers)
    on an already seeded PROJECT; finish_locust() returns its figures. Nothing of the tracker's
    own package runs on the client: the deployed CLI seeds and counts."""
    code = (
        "import json, sys\n"
        f"sys.path.insert(0, {str(REPO)!r})\n"
        "from loadtest.runner import run_headless\n"
        f"r = run_headless({host!r}, project={project!r}, users={users}, spawn_rate={users},"
        f" run_time_s={seconds}, workers={workers}, multi='1-10', download_time='uniform:0.01,0.03',"
        f" retry_delay_s=0.2, min_irsr=0.0, workdir={str(workdir)!r},"
        # The 5xx of a failover are judged by the caller, by when they came (HAProxy's counts).
        " extra_args=('--max-5xx', '1000000', '--max-done-not-ok', '1000000'))\n"
        "print('RESULT ' + json.dumps({k: r[k] for k in ('exit_code', 'passed', 'failures')}"
        " | {'summary': r['summary'], 'log': r['log'][-2000:]}))\n"
    )
    return subprocess.Popen(
        ["ip", "netns", "exec", f"trkd-{CLIENT[0]}", sys.executable, "-c", code],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def finish_locust(process: subprocess.Popen, timeout_s: float) -> dict:
    output, _ = process.communicate(timeout=timeout_s)
    lines = [line for line in output.splitlines() if line.startswith("RESULT ")]
    assert lines, output[-3000:]
    return json.loads(lines[-1][len("RESULT ") :])


def start_warrior(host: str, project: str, number: int, multi: int, claims: int, work_dir: Path):
    """A real seesaw-kit warrior (tests/support/warrior_driver.py) in the client namespace,
    its output in WORK_DIR/warrior.log."""
    work_dir.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen(
        [
            "ip",
            "netns",
            "exec",
            f"trkd-{CLIENT[0]}",
            sys.executable,
            str(DRIVER),
            "--tracker",
            host,
            "--project",
            project,
            "--downloader",
            f"deploy-w{number}",
            "--multi",
            str(multi),
            "--claims",
            str(claims),
            "--work-dir",
            str(work_dir),
        ],
        cwd=work_dir,
        stdin=subprocess.DEVNULL,
        stdout=open(work_dir / "warrior.log", "ab"),  # seesaw logs every item: no pipe to fill
        stderr=subprocess.STDOUT,
    )
