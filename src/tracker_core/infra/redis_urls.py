"""The Redis URLs the tracker takes: one Redis, a Sentinel service, or a Redis Cluster.

Owns their parsing (topology.py's docstring gives the forms) and the plain ``redis://`` URL of one
node that the Sentinel and Cluster connections open.
"""

from __future__ import annotations

from urllib.parse import parse_qs, quote, unquote, urlsplit

SENTINEL_SCHEME = "redis+sentinel"
CLUSTER_SCHEME = "redis+cluster"


def _split_hosts(netloc: str) -> tuple[str | None, list[tuple[str, int]]]:
    """'[:pw@]h1:p1,h2:p2' -> (password, [(h1, p1), (h2, p2)])."""
    password = None
    if "@" in netloc:
        auth, netloc = netloc.rsplit("@", 1)
        password = unquote(auth.split(":", 1)[1] if ":" in auth else auth) or None
    hosts = []
    for part in netloc.split(","):
        host, _, port = part.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"bad host:port {part!r} in Redis URL")
        hosts.append((host.strip("[]"), int(port)))
    return password, hosts


def node_url(host: str, port: int, password: str | None, db: int = 0) -> str:
    auth = f":{quote(password, safe='')}@" if password else ""
    return f"redis://{auth}{host}:{port}/{db}"


def parse_topology_url(url: str) -> dict:
    """Describe URL: {'kind': 'single'|'sentinel'|'cluster', ...}; ValueError when malformed."""
    parts = urlsplit(url)
    if parts.scheme == SENTINEL_SCHEME:
        password, hosts = _split_hosts(parts.netloc)
        path = [p for p in parts.path.split("/") if p]
        if not path or len(path) > 2 or (len(path) == 2 and not path[1].isdigit()):
            raise ValueError("a Sentinel URL names the service: redis+sentinel://HOSTS/SERVICE[/DB]")
        return {
            "kind": "sentinel",
            "password": password,
            "sentinels": hosts,
            "service": path[0],
            "db": int(path[1]) if len(path) == 2 else 0,
            **_wait_options(parts.query),
        }
    if parts.scheme == CLUSTER_SCHEME:
        password, hosts = _split_hosts(parts.netloc)
        if parts.path.strip("/") not in ("", "0"):
            raise ValueError("a Redis Cluster has only database 0")
        return {"kind": "cluster", "password": password, "nodes": hosts, **_wait_options(parts.query)}
    return {"kind": "single", "url": url}


def _wait_options(query: str) -> dict:
    """?wait_replicas=N (1: a replica acknowledges each change; 0: never wait) and
    ?wait_timeout_ms=T (2000: how long, else 503)."""
    values = parse_qs(query)
    return {
        "wait_replicas": int(values.get("wait_replicas", ["1"])[0]),
        "wait_timeout_ms": int(values.get("wait_timeout_ms", ["2000"])[0]),
    }
