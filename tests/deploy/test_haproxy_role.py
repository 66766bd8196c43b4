"""HAProxy as the loadbalancer role configures it, without root: rendered with Ansible from the
roles' defaults, checked by `haproxy -c`, then run in front of a real node (tracker serve with the
flags of the unit the tracker role writes) on loopback. They need haproxy and redis-server, not
root: TRACKER_DEPLOY_TEST=1 pytest tests/deploy -k haproxy.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from deploy.harness import ANSIBLE_DIR, VENV_BIN, run, wait_for

pytestmark = [pytest.mark.deploy, pytest.mark.timeout(3600)]


ROLES = ANSIBLE_DIR / "roles"
BJOERN_HEAD_LIMIT = 80 * 1024  # http-parser's HTTP_MAX_HEADER_SIZE: bjoern's bare 400 past it
WEBSOCKET = (
    "Upgrade: websocket",
    "Connection: Upgrade",
    "Sec-WebSocket-Version: 13",
    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
)


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

    from tracker_api.admin import api_request
    from tracker_api.admin.pages import forms
    from tracker_api.warrior_api import backfeed_route, warrior_routes
    from tracker_core.infra.rawredis import RawRedis

    cfg, node_env = render_roles(tmp_path)
    checked = haproxy_check(tmp_path / "haproxy.cfg")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    lb, node = role_defaults("loadbalancer"), role_defaults("tracker")
    # Each path's cap is the app's own limit for it: the same bytes pass, one more is refused.
    assert lb["loadbalancer_max_body_bytes"] == warrior_routes.MAX_BODY_BYTES == api_request.MAX_JSON_BYTES
    assert lb["loadbalancer_max_done_body_bytes"] == warrior_routes.MAX_DONE_BODY_BYTES
    assert lb["loadbalancer_max_backfeed_body_bytes"] == backfeed_route.MAX_BODY_BYTES
    assert lb["loadbalancer_max_admin_upload_bytes"] == api_request.MAX_UPLOAD_BYTES
    assert lb["loadbalancer_max_admin_form_bytes"] == forms.MAX_FORM_BYTES
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
        len(f"/{'p' * 100}/items/{'%F0%9F%98%80' * warrior_routes.MAX_ITEM_CHARS}.json")
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
    from tracker_core.infra.embedded import free_port

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
        # The live backend has its own checks: one made before the feed listened marks it down
        # (503) until two pass, 2 s apart.
        wait_for(
            lambda: probe.request("GET", "/live/lbproj", headers=WEBSOCKET, timeout_s=3)["status"] == 101,
            "the live feed behind HAProxy",
            30,
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
    from tracker_api.admin import api_request
    from tracker_api.admin.pages import forms
    from tracker_api.warrior_api import backfeed_route, warrior_routes

    probe = balanced_node["probe"]
    claim = {"downloader": "lbwarrior", "api_version": "2", "version": "1"}
    for path, limit in [
        ("/lbproj/request", warrior_routes.MAX_BODY_BYTES),
        ("/lbproj/upload", warrior_routes.MAX_BODY_BYTES),
        ("/lbproj/done", warrior_routes.MAX_DONE_BODY_BYTES),
        ("/lbproj/multi=1000//done+request", warrior_routes.MAX_DONE_BODY_BYTES),
        ("/lbproj/release", warrior_routes.MAX_DONE_BODY_BYTES),
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
        probe.request("POST", "/lbproj/multi=5/release", json_body(warrior_routes.MAX_BODY_BYTES + 1))[
            "status"
        ]
        == 413
    )
    entries = b"\0".join(f"https://example.com/bf {i}?%".encode() for i in range(20))
    at = probe.request("POST", balanced_node["backfeed"], entries.ljust(backfeed_route.MAX_BODY_BYTES, b"z"))
    assert at["by"] == "node", at
    past = probe.request(
        "POST", balanced_node["backfeed"], entries.ljust(backfeed_route.MAX_BODY_BYTES + 1, b"z")
    )
    assert (past["status"], past["by"]) == (413, "lb"), past
    # Refused on the announced length alone, so "Expect: 100-continue" gets 413, never 100.
    bearer = (f"Authorization: Bearer {balanced_node['token']}",)
    for path, limit, headers in [
        ("/lbproj/done", warrior_routes.MAX_DONE_BODY_BYTES, ()),
        ("/lbproj/d%6Fne", warrior_routes.MAX_DONE_BODY_BYTES, ()),  # the node decodes it
        ("/api/admin/projects/lbproj/items", api_request.MAX_UPLOAD_BYTES, bearer),
        ("/admin/lbproj/items", forms.MAX_FORM_BYTES, ()),
    ]:
        assert probe.head_only(path, limit, headers)["status"] == 100, path
        assert probe.head_only(path, limit + 1, headers)["status"] == 413, path
    # Without a token, an admin body past the JSON limit is refused as the node would (401), unread.
    anonymous = probe.head_only("/api/admin/projects/lbproj/items", api_request.MAX_JSON_BYTES + 1)
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

    from tracker_api.warrior_api import warrior_routes

    probe = balanced_node["probe"]
    lb = role_defaults("loadbalancer")
    # The longest item name there is, percent-encoded: its status is served. (No "/" in it: the
    # node decodes %2F before routing, so a name with one has no status URL at all.)
    name = ("https:example.com?q=%25&x=#a b" + "é" * warrior_routes.MAX_ITEM_CHARS)[
        : warrior_routes.MAX_ITEM_CHARS
    ]
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
    assert probe.request("GET", "/live/lbproj", headers=WEBSOCKET, timeout_s=3)["status"] == 101
    for path, headers in [
        ("/lbproj/request", WEBSOCKET),
        ("/", WEBSOCKET),
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
