"""An open-loop load generator: requests start on a fixed schedule, whatever the server does.

wrk is closed loop: a connection sends its next request only when the last one is answered, so
when the server stalls the load stops with it and the stall is counted once, not for every
request that should have been sent meanwhile (coordinated omission). wrk2 fixes that with an
intended-start schedule, but Debian does not package it. This client does what wrk2 does:
request i is due at t0 + i / rate; it goes out on a keep-alive connection that is idle, or
waits in a queue when none is, and its latency counts from when it was DUE, not from when it
went out. A slow server therefore shows as latency, never as a lower offered rate.

One thread, epoll, prebuilt request bytes, so that its own CPU (reported beside the figures,
measured with time.thread_time) stays a small share of what the server gets on the same cores.
The client's own lateness (how long after its due time each request went out) is reported too:
it is part of the latency measured, so the figures are an upper bound on the server's.
"""

from __future__ import annotations

import array
import errno
import os
import select
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass, field

# Below this wait, wait with select() (microsecond timeouts) rather than epoll, whose timeout is
# rounded up to whole milliseconds and would make every send up to 1 ms late.
FINE_WAIT_BELOW_S = 0.002


@dataclass
class _Connection:
    sock: socket.socket
    buffer: bytearray = field(default_factory=bytearray)
    due_ns: int = 0  # when the request on it was due (its latency counts from here)
    sent_ns: int = 0  # when it went out (the latency wrk would report counts from here)
    port: int = 0  # its local port: which worker holds it shows in `ss`


def request_bytes(host: str, port: int, path: str, body: bytes, headers: dict[str, str]) -> bytes:
    """One HTTP/1.1 keep-alive POST, ready to send."""
    lines = [f"POST {path} HTTP/1.1", f"Host: {host}:{port}", f"Content-Length: {len(body)}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def response_end(buffer: bytearray) -> tuple[int, int] | None:
    """(length, status) of the whole first response in BUFFER, or None while it is incomplete.

    Every server here sends Content-Length (no chunked bodies on these routes)."""
    header_end = buffer.find(b"\r\n\r\n")
    if header_end < 0:
        return None
    head = buffer
    start = buffer.find(b"\r\nContent-Length:", 0, header_end)  # as servers spell it: no copy
    if start < 0:
        head = bytes(buffer[:header_end]).lower()
        start = head.find(b"\r\ncontent-length:")
    if start < 0:
        raise RuntimeError(f"a response without Content-Length: {bytes(buffer[:200])!r}")
    stop = head.find(b"\r\n", start + 2, header_end)
    length = int(head[start + 17 : stop if stop >= 0 else header_end])
    total = header_end + 4 + length
    if len(buffer) < total:
        return None
    return total, int(buffer[9:12])


def percentiles_ms(latencies_ns: array.array) -> dict:
    """p50, p90, p99, p99.9 and max of LATENCIES_NS, in milliseconds (nearest rank)."""
    ordered = sorted(latencies_ns)
    if not ordered:
        return {name: None for name in ("p50", "p90", "p99", "p999", "max")}

    def rank(share: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(share * len(ordered)))] / 1e6, 3)

    return {
        "p50": rank(0.50),
        "p90": rank(0.90),
        "p99": rank(0.99),
        "p999": rank(0.999),
        "max": round(ordered[-1] / 1e6, 3),
    }


def raise_priority(nice: int) -> int:
    """Run this thread at NICE (negative: ahead of ordinary work) where allowed; the nice it got.

    A sender starved of a core sends late, and lateness counts as latency: on a shared machine
    the client should not queue behind other work for its few per cent of a core."""
    thread = threading.get_native_id()
    try:
        os.setpriority(os.PRIO_PROCESS, thread, nice)
    except PermissionError:
        pass
    return os.getpriority(os.PRIO_PROCESS, thread)


def run(
    host: str,
    port: int,
    requests: list[bytes],
    rate_per_s: float,
    duration_s: float,
    connections: int = 64,
    timeout_s: float = 5.0,
    nicer_by: int = 0,
    timeline: bool = False,
    connected=None,
) -> dict:
    """Offer RATE_PER_S requests a second for DURATION_S over CONNECTIONS keep-alive connections
    (REQUESTS used in turn); the latency figures, from each request's due time. The sending
    thread runs NICER_BY ahead of its process while it sends (raise_priority), then as before."""
    own_nice = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    client_nice = raise_priority(own_nice - nicer_by) if nicer_by else own_nice
    try:
        return _run(
            host, port, requests, rate_per_s, duration_s, connections, timeout_s, timeline, connected
        ) | {"client_nice": client_nice}
    finally:
        if client_nice != own_nice:
            raise_priority(own_nice)


def _run(
    host, port, requests, rate_per_s, duration_s, connections, timeout_s, timeline=False, connected=None
) -> dict:
    total = max(1, int(rate_per_s * duration_s))
    interval_ns = 1e9 / rate_per_s
    poller = select.epoll()
    epoll_fd = [poller.fileno()]
    by_fd: dict[int, _Connection] = {}

    def connect() -> _Connection:
        sock = socket.create_connection((host, port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setblocking(False)
        conn = _Connection(sock, port=sock.getsockname()[1])
        by_fd[sock.fileno()] = conn
        poller.register(sock.fileno(), select.EPOLLIN)
        return conn

    # The connection freed last is reused first (a stack): it belongs to the worker that answered
    # last, so the load follows the workers that keep up, as accept() hands a new connection to an
    # idle worker. Taken in turn instead, each worker would get load in proportion to how many
    # connections it happened to accept, and the one with most would saturate first.
    idle = [connect() for _ in range(connections)]
    # What CONNECTED (given the connections' local ports) returns is kept: which server process
    # holds each connection is fixed for the run.
    extra = {"connected": connected([conn.port for conn in idle])} if connected else {}
    latencies = array.array("q")
    send_lag = array.array("q")  # due to sent, while a connection was free: the client's own delay
    queued = array.array("q")  # due to sent, for those that found every connection busy
    from_send = array.array("q")
    due_queue: deque[int] = deque()
    answers: list[tuple[int, int, int, int]] = []
    statuses: dict[int, int] = {}
    errors = {"reset": 0, "timeout": 0}
    sent = next_index = 0
    cpu_before = time.thread_time()
    t0 = time.monotonic_ns() + 20_000_000  # connections are open; start on a clean schedule
    give_up_ns = t0 + int((duration_s + timeout_s) * 1e9)
    while len(latencies) + errors["reset"] < total:
        now = time.monotonic_ns()
        if now > give_up_ns:
            errors["timeout"] = total - len(latencies) - errors["reset"]
            break
        waiting = len(due_queue)  # these found every connection busy when they fell due
        while next_index < total and t0 + next_index * interval_ns <= now:
            due_queue.append(int(t0 + next_index * interval_ns))
            next_index += 1
        while due_queue and idle:
            conn = idle.pop()
            conn.due_ns, conn.sent_ns = due_queue.popleft(), now
            conn.sock.sendall(requests[sent % len(requests)])  # a few hundred bytes: never blocks
            (queued if waiting else send_lag).append(now - conn.due_ns)
            waiting = max(0, waiting - 1)
            sent += 1
        wait_s = (t0 + next_index * interval_ns - now) / 1e9
        if due_queue or next_index >= total:  # only an answer can make progress now
            events = poller.poll(0.05)
        elif wait_s <= 0:
            events = poller.poll(0)
        elif wait_s < FINE_WAIT_BELOW_S:
            # select() takes microseconds; the epoll descriptor is readable once any socket is,
            # so an answer arriving meanwhile ends the wait at once.
            events = poller.poll(0) if select.select(epoll_fd, (), (), wait_s)[0] else ()
        else:
            events = poller.poll(wait_s - 0.001)
        for fd, _ in events:
            conn = by_fd[fd]
            try:
                data = conn.sock.recv(65536)
            except OSError as exc:
                if exc.errno == errno.EAGAIN:
                    continue
                data = b""
            if not data:  # the server closed it: the request on it is lost, a new one takes its place
                poller.unregister(fd)
                del by_fd[fd]
                conn.sock.close()
                errors["reset"] += 1
                idle.append(connect())
                continue
            conn.buffer += data
            end = response_end(conn.buffer)
            if end is None:
                continue
            answered_ns = time.monotonic_ns()
            latencies.append(answered_ns - conn.due_ns)
            from_send.append(answered_ns - conn.sent_ns)
            if timeline:
                answers.append((conn.due_ns - t0, conn.sent_ns - t0, answered_ns - t0, conn.port))
            length, status = end
            statuses[status] = statuses.get(status, 0) + 1
            del conn.buffer[:length]
            idle.append(conn)
    elapsed_s = (time.monotonic_ns() - t0) / 1e9
    cpu_s = time.thread_time() - cpu_before
    for conn in by_fd.values():
        conn.sock.close()
    poller.close()
    answered = len(latencies)
    if timeline:
        extra["timeline"] = answers
    return extra | {
        "target_per_s": round(rate_per_s, 1),
        "requests": answered,
        "seconds": round(elapsed_s, 3),
        "requests_per_s": round(answered / elapsed_s, 1) if elapsed_s > 0 else None,
        "connections": connections,
        "latency_ms": percentiles_ms(latencies),
        "latency_from_send_ms": percentiles_ms(from_send),
        "send_lag_ms": percentiles_ms(send_lag),
        # The server held all CONNECTIONS requests at once: these waited in the client, counted.
        "queued_for_a_connection": len(queued),
        "queued_wait_ms": percentiles_ms(queued),
        "non_2xx": sum(n for status, n in statuses.items() if not 200 <= status < 300),
        "errors": errors,
        "client_cpu_us_per_request": round(cpu_s * 1e6 / answered, 1) if answered else None,
    }
