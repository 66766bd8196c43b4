"""What an item lookup costs against a project's size: the anonymous answer (one script, no disk)
and the admin's story (every segment file searched, the whole done log read).

The project is built directly, as `tracker maintain` and the done script leave one (no claims are
made): S segment files of N URL names each, registered; L archived done-log files of E one-item
entries, registered, and the stream's entries after them. Then, each the median of --repeat:
- anonymous: Engine.item_place (GET /P/items/NAME.json's work) of a name in the last segment
  file, and of a name found nowhere;
- story: admin items.story of a name in the last segment file (every file before it searched),
  of a name found nowhere (every file searched, the whole log read), and one the oldest log file
  names;
- export: `tracker log export --item`'s work for that name;
- the log's item filter per entry: passed over by its byte search, against decoded and matched
  (what log_archive.ITEM_SCAN_SHARE stands for).

    .venv/bin/python benchmarks/item_story_cost.py [--segments 10 100 1000] [--names 50000]
        [--log-files 10] [--entries 50000] [--stream 100000] [--repeat 3]

Writes benchmarks/results/item_story_cost.json and .md.
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import redis
from server_bench.results_file import run_header, write_results

from tracker_core.admin import item_verbs, project_verbs
from tracker_core.admin.context import AdminContext
from tracker_core.donelog import log_archive
from tracker_core.infra.embedded import EmbeddedRedis, free_port
from tracker_core.items.engine import Engine
from tracker_core.keyspace import ProjectKeys
from tracker_core.offload import segment_file

RESULTS = Path(__file__).with_name("results")
P = "big"
K = ProjectKeys(P)


def segment_name(segment: int, n: int) -> str:
    return f"https://example.com/s{segment}/thread/{n:07d}?page=2&q=a%20b#post-{n}"


def log_name(entry: int) -> str:
    return f"https://example.com/done/{entry:09d}?tab=files"


def timed(repeat: int, call, *args, **kwargs) -> float:
    """The median seconds of REPEAT calls of CALL(*ARGS, **KWARGS)."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        call(*args, **kwargs)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def add_segments(r, directory: Path, first: int, last: int, names: int) -> None:
    """Segment files FIRST..LAST of NAMES names each, registered as offload_commit leaves them."""
    for number in range(first, last + 1):
        segment_file.write_segment(
            segment_file.segment_path(directory, P, number), [segment_name(number, n) for n in range(names)]
        )
        r.hset(K.segments, mapping={str(number): names, "#next": number})
        r.hset(K.segment_queues, str(number), "todo")


def entry_fields(entry: int) -> dict:
    return {
        "downloader": f"dl{entry % 500}",
        "ip": "10.0.0.1",
        "items": log_name(entry),
        "bytes": "12345",
        "domains": "example.com\x0012345",
        "version": "20240102.01",
        "id": "null",
        "at": str(1_700_000_000_000 + entry),
    }


def add_log(r, directory: Path, files: int, entries: int, stream: int) -> None:
    """FILES archived log files of ENTRIES entries (ids MS-0 from 1), then STREAM entries in Redis."""
    entry = 0
    for number in range(1, files + 1):
        lines = []
        for _ in range(entries):
            entry += 1
            lines.append(log_archive.encode(log_archive.record("done", f"{entry}-0", entry_fields(entry))))
        log_archive.write_lines(log_archive.segment_path(directory, P, number), lines)
        r.hset(K.log_segments, str(number), f"{entry - entries + 1}-0 {entry}-0 {entries}")
        r.hset(K.log_segments, mapping={"#archived": f"{entry}-0", "#next": number})
    pipe = r.pipeline(transaction=False)
    for _ in range(stream):
        entry += 1
        pipe.xadd(K.log, entry_fields(entry), id=f"{entry}-0")
        if len(pipe) >= 5000:
            pipe.execute()
    pipe.execute()


def filter_share(r, directory: Path, repeat: int) -> dict:
    """Seconds per entry of the oldest log file read through the item filter: a name no entry
    holds (every line passed over after one byte search of the file) and a name every line may
    hold (a substring of each: every line decoded and looked at)."""
    path = log_archive.segment_path(directory, P, 1)
    entries = sum(1 for _ in log_archive.read_lines(path))

    def through(name: str) -> None:
        for _ in log_archive._file_records(path, log_archive.Wanted([name])):
            pass

    passed = timed(repeat, through, "https://example.com/never") / entries
    # No name is a substring of another's JSON spelling here but this one's own quotes: the
    # byte search finds a line's "ip" value, so every line is decoded, and none is named.
    decoded = timed(repeat, through, "10.0.0.1") / entries
    return {"passed_over_us": passed * 1e6, "decoded_us": decoded * 1e6, "share": passed / decoded}


def run(args) -> dict:
    results = {
        **run_header("benchmarks/item_story_cost.py", None, os.getloadavg()),
        "names_per_segment": args.names,
        "log_files": args.log_files,
        "entries_per_log_file": args.entries,
        "stream_entries": args.stream,
        "rows": [],
    }
    work = Path(tempfile.mkdtemp(prefix="item-story-cost-"))
    server = EmbeddedRedis(work / "redis", port=free_port())
    server.start()
    try:
        r = redis.Redis.from_url(server.url, decode_responses=True)
        admin = AdminContext.from_url(server.url)
        engine = Engine(server.url)
        directory = work / "segments"
        project_verbs.create(admin, P, {"log_maxlen": str(max(args.stream, 1))})
        add_log(r, directory, args.log_files, args.entries, args.stream)
        done_name = log_name(1)
        results["filter"] = filter_share(r, directory, args.repeat)
        built = 0
        for count in sorted(args.segments):
            add_segments(r, directory, built + 1, count, args.names)
            built = count
            last = segment_name(count, args.names - 1)
            nowhere = "https://example.com/never/was?here=1"
            assert item_verbs.story(admin, P, directory, [last])[0]["segment"] == count

            export = log_archive.export
            story = item_verbs.story
            anonymous, repeat = engine.item_place, args.repeat
            row = {
                "segments": count,
                "names_on_disk": count * args.names,
                "anonymous_in_segment_ms": timed(repeat * 10, anonymous, P, last) * 1e3,
                "anonymous_nowhere_ms": timed(repeat * 10, anonymous, P, nowhere) * 1e3,
                "story_in_last_segment_s": timed(repeat, story, admin, P, directory, [last]),
                "story_nowhere_s": timed(repeat, story, admin, P, directory, [nowhere]),
                "story_done_s": timed(repeat, story, admin, P, directory, [done_name]),
                "export_item_s": timed(repeat, export, r, K, directory, io.BytesIO(), item=done_name),
            }
            results["rows"].append(row)
            print(row, flush=True)
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    return results


def report(results: dict) -> str:
    f = results["filter"]
    lines = [
        "# Item lookup cost",
        "",
        f"`{results['command']}` at {results['commit']}, {results['date']}, load {results['load_average']}.",
        f"{results['names_per_segment']:,} names a segment file; done log: {results['log_files']} files of "
        f"{results['entries_per_log_file']:,} entries and {results['stream_entries']:,} in Redis.",
        "",
        "| segments | names on disk | anonymous, in a segment | anonymous, nowhere | story, last segment "
        "| story, nowhere | story, done | log export --item |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in results["rows"]:
        lines.append(
            f"| {row['segments']:,} | {row['names_on_disk']:,} | {row['anonymous_in_segment_ms']:.2f} ms "
            f"| {row['anonymous_nowhere_ms']:.2f} ms | {row['story_in_last_segment_s']:.2f} s "
            f"| {row['story_nowhere_s']:.2f} s | {row['story_done_s']:.2f} s | {row['export_item_s']:.2f} s |"
        )
    lines += [
        "",
        f"Log item filter: {f['passed_over_us']:.2f} µs an entry passed over, {f['decoded_us']:.2f} µs "
        f"decoded (share {f['share']:.3f}).",
    ]
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--segments", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--names", type=int, default=50_000)
    parser.add_argument("--log-files", type=int, default=10)
    parser.add_argument("--entries", type=int, default=50_000)
    parser.add_argument("--stream", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    results = run(args)
    write_results(RESULTS, "item_story_cost", results, report(results))


if __name__ == "__main__":
    main()
