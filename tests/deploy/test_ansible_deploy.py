"""Apply ansible/site.yml to throwaway Debian roots and drive the deployed tracker through HAProxy.

Seven "servers" (three Redis hosts forming a Cluster, each with a primary and a replica of
another host's primary; two tracker nodes; a load balancer) are Debian roots provisioned by the
playbook as ansible/inventories/cluster describes them (tests/deploy/harness.py). A sharded
project is worked through the load balancer by real seesaw-kit warriors and distributed Locust
warriors for RUN_S seconds; midway one Redis primary is killed (SIGKILL: its host is lost) and
its replica takes over. Afterwards every item is accounted for. Needs root; `make deploy-test`.
"""

from __future__ import annotations

import json
import os
import re
import signal
import statistics
import sys
import time
from datetime import UTC, datetime

import pytest

from deploy.harness import (
    LAST_RUN,
    NETNS_CHROOT,
    REDIS_HOSTS,
    REDIS_PORTS,
    REPO,
    ROOTS,
    Lab,
    TrafficSampler,
    deployed_python,
    ensure_base_tarball,
    finish_locust,
    haproxy_servers,
    in_client,
    ip,
    log_tail,
    playbook,
    recap,
    start_locust,
    start_warrior,
    tracker_cli,
    unit_exec,
    wait_for,
    write_inventory,
)

PROJECT, SHARDS = "deployshard", 3
ITEMS = 600_000  # more than the run can finish (2,500 items/s on a loaded 2-core box): never dry
WARRIORS, MULTI = 2, 10
LOCUST_USERS, RUN_S, KILL_AT_S, WINDOW_S = 12, 80, 40, 10
# The 5xx allowed: none before the kill; after the replica is promoted, none once SETTLE_S passed.
SETTLE_S = 3

pytestmark = [pytest.mark.deploy, pytest.mark.timeout(3600)]
# Every shard's done log as JSON lines, shard by shard, through the deployed tracker's own reader:
# a check of `tracker log export`, which merges them.
DONE_LOGS = (
    "import os, sys\n"
    "from pathlib import Path\n"
    "from tracker_core.donelog import log_reader\n"
    "from tracker_core.admin.context import AdminContext\n"
    "ctx = AdminContext.from_url(os.environ['TRACKER_REDIS_URL'])\n"
    "for k in ctx.shards(sys.argv[1]):\n"
    "    log_reader.export(ctx.conn, k, Path(os.environ['TRACKER_SEGMENTS_DIR']), sys.stdout.buffer)\n"
)


def redis_cli(lab: Lab, host: str, port: int, password: str, *args, check=True) -> str:
    """redis-cli on HOST's own root and namespace, against its instance on PORT."""
    return lab.in_server(
        host,
        "redis-cli",
        "-h",
        ip(host),
        "-p",
        str(port),
        *args,
        env={"REDISCLI_AUTH": password},
        check=check,
    ).stdout


def cluster_nodes(lab: Lab, password: str, via: tuple[str, int]) -> dict[str, dict]:
    """CLUSTER NODES as seen by VIA: "ip:port" -> {id, role, primary (its primary's id), flags}."""
    nodes = {}
    for line in redis_cli(lab, *via, password, "cluster", "nodes").splitlines():
        node_id, address, flags, primary, _ping, _pong, _epoch, _link, *slots = line.split()
        role = "primary" if "master" in flags.split(",") else "replica"
        ranges = [tuple(map(int, (s + "-" + s).split("-")[:2])) for s in slots if not s.startswith("[")]
        nodes[address.split("@")[0]] = {
            "id": node_id,
            "role": role,
            "primary": primary,
            "flags": flags,
            "slots": ranges,
        }
    return nodes


def owner(nodes: dict[str, dict], key: str) -> str:
    """The address of the primary serving KEY's hash slot, by NODES (cluster_nodes)."""
    from redis.crc import key_slot

    slot = key_slot(key.encode())
    return next(a for a, n in nodes.items() if any(lo <= slot <= hi for lo, hi in n["slots"]))


def test_playbook_deploys_a_sharded_tracker_on_a_redis_cluster_that_survives_a_failover(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root (debootstrap, chroot, network namespaces)")
    started = time.monotonic()
    ensure_base_tarball()
    lab = Lab()
    try:
        for name in ("redis1", "tracker1", "lb"):
            lab.make_root(name)
        inventory, password_file = tmp_path / "inventory.json", tmp_path / "redis-password"
        write_inventory(inventory, password_file)
        playbook(inventory, "redis1,tracker1,lb", ROOTS / "ansible-first.log")
        # The other servers start as copies (cp -x: the mounts are not copied) and are provisioned
        # as themselves.
        for name, origin in [("redis2", "redis1"), ("redis3", "redis1"), ("tracker2", "tracker1")]:
            lab.make_root(name, copy_of=origin)
        copies = recap(playbook(inventory, "redis2,redis3,tracker2", ROOTS / "ansible-copies.log"))
        assert set(copies) == {"redis2", "redis3", "tracker2"} and not any(
            row["failed"] or row["unreachable"] for row in copies.values()
        ), copies
        password = password_file.read_text().strip()
        assert re.fullmatch(r"[A-Za-z0-9]{32}", password)
        provisioned_s = time.monotonic() - started

        # What the playbook wrote, checked before anything runs: the redis role's tuned settings
        # on both instances of every host, in cluster mode, with the password from the file.
        for host in REDIS_HOSTS:
            for port in REDIS_PORTS:
                conf = (lab.root(host) / f"etc/redis/tracker-{port}.conf").read_text().splitlines()
                for line in [
                    "appendonly yes",
                    "appendfsync everysec",
                    "auto-aof-rewrite-min-size 256mb",
                    "maxmemory-policy noeviction",
                    "maxmemory 256mb",
                    "tcp-backlog 4096",
                    f"bind {ip(host)}",
                    f"port {port}",
                    "cluster-enabled yes",
                    f"cluster-announce-ip {ip(host)}",
                    "cluster-node-timeout 5000",
                    "cluster-require-full-coverage no",
                    f"requirepass {password}",
                    f"masterauth {password}",
                ]:
                    assert line in conf, (host, port, line)
                assert not any(line.startswith(("replicaof", "slaveof")) for line in conf)
            sysctl = (lab.root(host) / "etc/sysctl.d/60-tracker-redis.conf").read_text()
            assert "vm.overcommit_memory = 1" in sysctl and "net.core.somaxconn = 4096" in sysctl
        seeds = ",".join(f"{ip(host)}:{port}" for host in REDIS_HOSTS for port in REDIS_PORTS)
        wants = "etc/systemd/system/multi-user.target.wants"
        for node in ("tracker1", "tracker2"):
            _, _, env = unit_exec(lab.root(node), "tracker-api.service")
            assert env["TRACKER_REDIS_URL"] == f"redis+cluster://:{password}@{seeds}"
            assert env["TRACKER_LIVE_URL"] == "/live"
            units = lab.root(node) / "etc/systemd/system"
            for unit in ("tracker-api.service", "tracker-live.service", "tracker-maintain.service"):
                assert (units / unit).read_text() == (REPO / "packaging/systemd" / unit).read_text()
        # The maintenance process runs on the first tracker node only (segments are local disk).
        assert (lab.root("tracker1") / wants / "tracker-maintain.service").is_symlink()
        assert not (lab.root("tracker2") / wants / "tracker-maintain.service").exists()
        haproxy_cfg = (lab.root("lb") / "etc/haproxy/haproxy.cfg").read_text()
        assert f"{ip('tracker1')}:8080" in haproxy_cfg and f"{ip('tracker2')}:8080" in haproxy_cfg

        lab.network()
        redis = {}
        for host in REDIS_HOSTS:
            for line in sysctl.splitlines():  # net.* are per namespace; vm.* the host's kernel
                if line.startswith("net."):
                    key, value = (part.strip() for part in line.split("="))
                    lab.in_server(host, "sysctl", "-qw", f"{key}={value}")
            for port in REDIS_PORTS:
                command, user, _ = unit_exec(lab.root(host), "redis-tracker@.service", str(port))
                redis[host, port] = lab.start(host, command, user=user, log=f"redis-{port}")
        for host, port in redis:
            wait_for(
                lambda h=host, p=port: redis_cli(lab, h, p, password, "ping", check=False).strip() == "PONG",
                f"Redis {host}:{port}",
                logs=(f"{host}-redis-{port}",),
            )

        # The cluster is formed by the playbook once the instances run: the same roots, each
        # task in its server's namespace. A second run changes nothing (formed once).
        wrapper = tmp_path / "netns-chroot"
        wrapper.write_text(NETNS_CHROOT)
        wrapper.chmod(0o755)
        live = {"ansible_chroot_exe": str(wrapper), "redis_cluster_live": True}
        form_started = time.monotonic()
        formed = playbook(inventory, "redis", ROOTS / "ansible-cluster.log", live, tags="redis_cluster")
        assert re.search(r"Create the cluster[^\n]*\n+changed: \[", formed), formed[-3000:]
        again = recap(
            playbook(inventory, "redis", ROOTS / "ansible-cluster-again.log", live, tags="redis_cluster")
        )
        assert set(again) == set(REDIS_HOSTS) and all(
            row["changed"] == 0 and row["failed"] == 0 for row in again.values()
        ), again
        form_s = time.monotonic() - form_started
        nodes = cluster_nodes(lab, password, ("redis1", 6379))
        primaries = {a: n for a, n in nodes.items() if n["role"] == "primary"}
        assert sorted(primaries) == sorted(f"{ip(h)}:6379" for h in REDIS_HOSTS), nodes
        by_id = {n["id"]: a for a, n in nodes.items()}
        replica_of = {by_id[n["primary"]]: a for a, n in nodes.items() if n["role"] == "replica"}
        assert sorted(replica_of) == sorted(primaries), nodes
        for primary, replica in replica_of.items():  # never on its primary's host
            assert primary.split(":")[0] != replica.split(":")[0], replica_of

        for node in ("tracker1", "tracker2"):
            for unit, log in [
                ("tracker-api.service", "api"),
                ("tracker-live.service", "live"),
                ("tracker-maintain.service", "maintain"),
            ]:
                if (lab.root(node) / wants / unit).is_symlink():
                    command, user, env = unit_exec(lab.root(node), unit)
                    process = lab.start(node, command, user=user, env=env, log=log)
                    if log == "maintain":
                        maintainer = process
        (lab.root("lb") / "run/haproxy").mkdir(parents=True, exist_ok=True)  # systemd's RuntimeDirectory
        lab.start("lb", ["/usr/sbin/haproxy", "-db", "-f", "/etc/haproxy/haproxy.cfg"], log="haproxy")
        wait_for(
            lambda: (s := haproxy_servers()) and all(r["status"] == "UP" for r in s.values()) and len(s) == 2,
            "both tracker nodes UP in HAProxy",
            logs=("lb-haproxy", "tracker1-api", "tracker2-api"),
        )
        lb = f"http://{ip('lb')}"
        # /metrics stays internal; a body past the claim limit and a stray upgrade are HAProxy's.
        for path in ("/metrics", "//metrics/", "/%6detrics"):
            code = in_client("curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", lb + path).stdout
            assert code == "403", (path, code)
        assert (
            in_client("curl", "-sf", "-o", "/dev/null", f"http://{ip('tracker1')}:8080/metrics").returncode
            == 0
        )
        code = in_client(
            "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--data-binary", "@-",
            f"{lb}/{PROJECT}/request", input_text="x" * ((1 << 20) + 1),
        ).stdout  # fmt: skip
        assert code == "413", code
        code = in_client(
            "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-H", "Upgrade: websocket",
            "-H", "Connection: Upgrade", f"{lb}/{PROJECT}/request",
        ).stdout  # fmt: skip
        assert code == "400", code

        # The sharded project (`--shards` once the tracker has it), each shard on its own primary.
        sharded = "--shards" in tracker_cli(lab, "project", "create", "--help").stdout
        tracker_cli(lab, "project", "create", PROJECT, *(["--shards", str(SHARDS)] if sharded else []))
        shown = json.loads(tracker_cli(lab, "project", "show", PROJECT, "--json").stdout)
        # Where each shard lives, as the tracker says; without --shards, the slot of {PROJECT}.
        placement = {s["shard"]: s["node"] for s in shown.get("shards", [])} or {
            0: owner(nodes, "{" + PROJECT + "}")
        }
        if sharded:
            assert sorted(placement.values()) == sorted(primaries), shown
        names = [f"deploy-item-{i:06d}" for i in range(ITEMS)]
        added = json.loads(
            tracker_cli(lab, "items", "add", PROJECT, "-", "--json", stdin="\n".join(names) + "\n").stdout
        )
        assert added == {"added": ITEMS, "duplicates": 0}, added

        # The run: seesaw-kit and Locust warriors through HAProxy; at KILL_AT_S the primary
        # holding shard 1 (the project's one shard without --shards) dies with its host, and its
        # replica is promoted.
        victim_shard = 1 if sharded else 0
        victim = placement[victim_shard]
        victim_host = next(h for h in REDIS_HOSTS if ip(h) == victim.split(":")[0])
        heir = replica_of[victim]
        heir_host = next(h for h in REDIS_HOSTS if ip(h) == heir.split(":")[0])
        with TrafficSampler() as traffic:
            run_started = time.time()
            locust = start_locust(lb, tmp_path / "locust", PROJECT, LOCUST_USERS, RUN_S)
            warriors = [
                start_warrior(lb, PROJECT, n, MULTI, 10**6, tmp_path / f"warrior-{n}")
                for n in range(WARRIORS)
            ]
            time.sleep(max(0.0, run_started + KILL_AT_S - time.time()))
            for number, warrior in enumerate(warriors):
                assert warrior.poll() is None, (tmp_path / f"warrior-{number}/warrior.log").read_text()[
                    -3000:
                ]
            redis[victim_host, 6379].send_signal(signal.SIGKILL)
            killed_at = time.time()
            wait_for(
                lambda: redis_cli(lab, heir_host, int(heir.split(":")[1]), password, "role").startswith(
                    "master"
                ),
                f"the replica {heir} promoted",
                timeout_s=30,
                every_s=0.1,
            )
            promoted_at = time.time()
            result = finish_locust(locust, RUN_S + 120)
            run_ended = time.time()
            for number, warrior in enumerate(warriors):  # they worked on through the failover
                assert warrior.poll() is None, (tmp_path / f"warrior-{number}/warrior.log").read_text()[
                    -3000:
                ]
                warrior.send_signal(signal.SIGTERM)
            for warrior in warriors:
                warrior.wait(timeout=30)
            time.sleep(2)  # the sampler sees the last answers
        summary = result["summary"]
        assert result["exit_code"] == 0 and result["passed"], result
        before = traffic.between(run_started, killed_at)
        failover = traffic.between(killed_at, promoted_at + SETTLE_S)
        after = traffic.between(promoted_at + SETTLE_S, run_ended)
        assert before[1] == 0 and after[1] == 0, (before, failover, after)
        windows = traffic.windows(run_started, run_ended, WINDOW_S)
        steady = [
            w["req_per_s"] for w in windows if WINDOW_S <= w["from_s"] and w["from_s"] + WINDOW_S <= KILL_AT_S
        ]
        recovered = [w["req_per_s"] for w in windows if w["from_s"] >= promoted_at - run_started + SETTLE_S]
        assert steady and recovered, windows
        level = statistics.median(steady)
        assert all(abs(rate - level) <= 0.5 * level for rate in steady), windows
        assert statistics.median(recovered) >= 0.5 * level, windows

        # Every item accounted for: queued, out or done, on whichever shard and node it lives.
        status = json.loads(tracker_cli(lab, "status", PROJECT, "--json").stdout)
        accounted = sum(
            int(status.get(k, 0) or 0) for k in ("todo_total", "out", "done", "dead", "offloaded")
        )
        assert accounted == ITEMS, status
        assert status["todo_total"] > 0, "the queue ran dry: no steady state to speak of"
        assert status["done"] >= summary["counts"]["items_done"], (status, summary["counts"])
        entries = [json.loads(line) for line in deployed_python(lab, DONE_LOGS, PROJECT).splitlines()]
        exported = sum(
            len(json.loads(line)["items"])
            for line in tracker_cli(lab, "log", "export", PROJECT).stdout.splitlines()
        )
        logged = [name for entry in entries for name in entry["items"]]
        assert exported == len(logged), (exported, len(logged))
        assert len(set(logged)) == status["done"], (len(set(logged)), status)
        repeats = len(logged) - len(set(logged))
        by_seesaw = sum(len(e["items"]) for e in entries if e["downloader"].startswith("deploy-w"))
        assert by_seesaw > 0, "the seesaw-kit warriors finished no item"
        assert repeats <= int(status.get("items_reclaimed", 0) or 0), (repeats, status)
        shown_after = json.loads(tracker_cli(lab, "project", "show", PROJECT, "--json").stdout)
        if sharded:
            assert {s["shard"]: s["node"] for s in shown_after["shards"]}[victim_shard] == heir, shown_after
        assert owner(
            cluster_nodes(lab, password, (heir_host, int(heir.split(":")[1]))), "{" + PROJECT + "}"
        ) == (heir if victim_shard == 0 else placement[0])

        # The lost host comes back (its unit's command, its AOF): it rejoins as its heir's replica.
        command, user, _ = unit_exec(lab.root(victim_host), "redis-tracker@.service", "6379")
        lab.start(victim_host, command, user=user, log="redis-6379")
        wait_for(
            lambda: (
                (n := cluster_nodes(lab, password, (heir_host, int(heir.split(":")[1]))))
                .get(victim, {})
                .get("role")
                == "replica"
                and n[victim]["primary"] == n[heir]["id"]
                and "fail" not in n[victim]["flags"]
            ),
            f"{victim} back as {heir}'s replica",
            timeout_s=60,
        )

        # The live page finds its feed through HAProxy's port 80.
        page = in_client("curl", "-sf", f"{lb}/{PROJECT}").stdout
        assert '<meta name="tracker-live-url" content="/live">' in page
        feed = in_client(
            sys.executable,
            "-c",
            "import json\nfrom websockets.sync.client import connect\n"
            f"with connect('ws://{ip('lb')}/live/{PROJECT}', open_timeout=10) as ws:\n"
            "    print(json.loads(ws.recv(timeout=10))['type'])\n",
        ).stdout
        assert feed.strip() == "log", feed
        # The maintenance process ran all along (it exits only on an error).
        assert maintainer.poll() is None, log_tail("tracker1-maintain")
        assert "Traceback" not in log_tail("tracker1-maintain", 100_000), log_tail("tracker1-maintain")
        servers = haproxy_servers()
        assert set(servers) == {"tracker1", "tracker2"} and all(int(r["stot"]) > 0 for r in servers.values())
        duration = time.monotonic() - started
        write_last_run(
            duration=duration,
            provisioned_s=provisioned_s,
            form_s=form_s,
            sharded=sharded,
            placement=placement,
            replica_of=replica_of,
            victim=victim,
            heir=heir,
            failover_s=promoted_at - killed_at,
            phases={"before": before, "failover": failover, "after": after},
            slowest=traffic.slowest_second(killed_at, promoted_at + SETTLE_S),
            windows=windows,
            summary=summary,
            status=status,
            logged=len(logged),
            repeats=repeats,
            by_seesaw=by_seesaw,
            exported=exported,
            servers=servers,
        )
    finally:
        lab.close()


def write_last_run(**f) -> None:
    """ansible/LAST_RUN.md: what the run did and measured."""
    status, counts, summary = f["status"], f["summary"]["counts"], f["summary"]

    def phase(name):
        answered, errors, span = f["phases"][name]
        return f"{answered} answers in {span:.0f} s ({answered / span if span else 0:.0f}/s), {errors} 5xx"

    shards = (
        ", ".join(f"shard {i} on {node}" for i, node in sorted(f["placement"].items()))
        if f["sharded"]
        else "not sharded (the tracker has no `--shards` yet)"
    )
    LAST_RUN.write_text(
        "# Last run of the deployment test\n\n"
        f"- date: {datetime.now(UTC):%Y-%m-%d %H:%M UTC}\n"
        "- command: `make deploy-test`"
        + (
            f" with TRACKER_DEPLOY_SOURCE={source}"
            if (source := os.environ.get("TRACKER_DEPLOY_SOURCE"))
            else ""
        )
        + "\n"
        f"- host: {os.cpu_count()} cores, load average {os.getloadavg()[1]:.1f} over the last 5 minutes "
        "(the figures below are this box's, shared with whatever else ran)\n"
        f"- duration: {f['duration']:.0f} s (provisioning {f['provisioned_s']:.0f} s, cluster formed and "
        f"rechecked by the playbook {f['form_s']:.0f} s; base root cached: see /var/cache/tracker-deploy)\n"
        "- servers: redis1-3 (each a primary on 6379 and on 6380 a replica of another host's primary: "
        + ", ".join(f"{replica} replicates {primary}" for primary, replica in sorted(f["replica_of"].items()))
        + "), tracker1, tracker2 (2 bjoern workers each; tracker1 also runs `tracker maintain`), "
        "HAProxy, in network namespaces; the tracker on `redis+cluster://` with the password from "
        "the inventory's password file\n"
        f"- project {PROJECT}: {shards}; {ITEMS} items seeded\n"
        f"- load: {WARRIORS} seesaw-kit warriors (multi={MULTI}) and Locust (master + 2 workers, "
        f"{LOCUST_USERS} users, multi 1-10) for {RUN_S} s through HAProxy\n"
        f"- failover: at {KILL_AT_S} s the primary {f['victim']} was killed (SIGKILL, its host gone); "
        f"{f['heir']} was promoted {f['failover_s']:.1f} s later; the old primary, restarted after "
        "the run, rejoined as its replica\n"
        f"- through HAProxy (every answer): before the kill {phase('before')}; from the kill to "
        f"{SETTLE_S} s after the promotion {phase('failover')}, {f['slowest']}/s in its slowest second; "
        f"after that {phase('after')}\n"
        f"- req/s per {WINDOW_S} s window: "
        + ", ".join(
            f"{w['from_s']}-{w['from_s'] + WINDOW_S} s {w['req_per_s']}"
            + (f" ({w['5xx']} 5xx)" if w["5xx"] else "")
            for w in f["windows"]
        )
        + "\n"
        f"- seesaw-kit warriors: {f['by_seesaw']} items done (their entries in the done logs)\n"
        f"- Locust: {counts['items_claimed']} items claimed, {counts['items_done']} done and acknowledged, "
        f"{summary['requests_per_s']} claims/s, 5xx {counts['server_5xx']}, transport errors "
        f"{counts['transport_errors']}, RTT p50 {summary['rtt_ms']['p50']} ms p99 {summary['rtt_ms']['p99']} ms\n"
        f"- accounted for: {status['done']} done + {status['out']} out + {status['todo_total']} queued"
        f" = {ITEMS} seeded; the shards' done logs {f['logged']} names ({f['repeats']} repeated); "
        f"`tracker log export` {f['exported']} of them\n"
        "- requests per node (HAProxy stot): "
        + ", ".join(f"{name} {row['stot']}" for name, row in sorted(f["servers"].items()))
        + "\n"
    )
