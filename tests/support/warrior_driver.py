"""Run the real seesaw-kit warrior pipeline against a tracker, as a grab script does.

Started as a subprocess by tests/e2e/test_seesaw_client.py, so that tornado's global IOLoop and the
``collections`` alias seesaw needs never touch the pytest process. Prints seesaw's own item log,
then one last line ``RESULT {json}`` with what the pipeline completed.
"""

from __future__ import annotations

import argparse
import collections
import collections.abc
import json
import os
import time

# seesaw 0.10.3 subclasses collections.MutableMapping, which Python 3.10 removed.
collections.MutableMapping = collections.abc.MutableMapping

from seesaw.item import ItemInterpolation, ItemValue  # noqa: E402
from seesaw.pipeline import Pipeline  # noqa: E402
from seesaw.runner import SimpleRunner  # noqa: E402
from seesaw.task import SimpleTask  # noqa: E402
from seesaw.tracker import (  # noqa: E402
    GetItemFromTracker,
    PrepareStatsForTracker,
    SendDoneToTracker,
    TrackerRequest,
    UploadWithTracker,
)


def shorten_back_off(seconds: float) -> None:
    """Keep seesaw's retry logic but wait `seconds` instead of 60 s growing to 300 s."""
    TrackerRequest.DEFAULT_RETRY_DELAY = seconds

    def increment_retry_delay(self, max_delay=300):
        self.retry_delay = seconds

    TrackerRequest.increment_retry_delay = increment_retry_delay


class WriteItemData(SimpleTask):
    """Stand in for the download: write the claimed names to a file in the item's directory."""

    def __init__(self, work_dir: str, hold_s: float = 0.0):
        SimpleTask.__init__(self, "WriteItemData")
        self.work_dir = work_dir
        self.hold_s = hold_s  # a download's time: the items stay out (claimed) that long

    def process(self, item):
        if self.hold_s:
            time.sleep(self.hold_s)
        item_dir = os.path.join(self.work_dir, item.item_id)
        os.makedirs(item_dir, exist_ok=True)
        item["item_dir"] = item_dir
        item["data_file"] = os.path.join(item_dir, f"{item.item_id}.txt")
        with open(item["data_file"], "w", encoding="utf-8") as out:
            out.write("\n".join(item["item_name"].split("\0")) + "\n")


def build_pipeline(args) -> Pipeline:
    """GetItem, download, stats, (upload), done: the shape of every grab script's pipeline."""
    base = f"{args.tracker}/{args.project}"
    request_base = f"{base}/multi={args.multi}/" if args.multi > 1 else base
    tasks = [
        GetItemFromTracker(request_base, args.downloader, args.version),
        WriteItemData(args.work_dir, args.hold_s),
        PrepareStatsForTracker(
            defaults={"downloader": args.downloader, "version": args.version},
            file_groups={"data": [ItemInterpolation("%(data_file)s")]},
            id_function=lambda item: {"warrior": "seesaw-e2e", "names": item["item_name"].count("\0") + 1},
        ),
    ]
    if args.upload:
        tasks.append(
            UploadWithTracker(
                base,
                args.downloader,
                files=[ItemInterpolation("%(data_file)s")],
                version=args.version,
                rsync_target_source_path=ItemInterpolation("%(item_dir)s/"),
                curl_connect_timeout="5",
                curl_speed_time="30",
            )
        )
    tasks.append(SendDoneToTracker(base, stats=ItemValue("stats")))
    return Pipeline(*tasks)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tracker", required=True, help="http://127.0.0.1:PORT")
    parser.add_argument("--project", required=True)
    parser.add_argument("--downloader", default="e2e-warrior")
    parser.add_argument("--version", default="20240101.01")
    parser.add_argument("--multi", type=int, default=1)
    parser.add_argument("--claims", type=int, required=True, help="pipeline runs (claims) to make")
    parser.add_argument("--concurrent", type=int, default=1)
    parser.add_argument("--upload", action="store_true")
    parser.add_argument("--work-dir", required=True)
    parser.add_argument("--retry-delay", type=float, default=0.3)
    parser.add_argument("--hold-s", type=float, default=0.0, help="seconds each download takes")
    args = parser.parse_args()

    shorten_back_off(args.retry_delay)
    pipeline = build_pipeline(args)
    completed, failed = [], []
    pipeline.on_complete_item += lambda _pipeline, item: completed.append(item["item_name"])
    pipeline.on_fail_item += lambda _pipeline, item: failed.append(item.item_id)
    runner = SimpleRunner(pipeline, concurrent_items=args.concurrent, max_items=args.claims)
    runner.start()
    names = [name for joined in completed for name in joined.split("\0")]
    print("RESULT " + json.dumps({"claims": len(completed), "names": names, "failed": failed}), flush=True)


if __name__ == "__main__":
    main()
