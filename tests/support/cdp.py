"""Drive Debian's headless Chromium over the DevTools protocol (a websocket; no extra browser)."""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

from websockets.sync.client import connect

from support.processes import start, stop_process
from tracker_core.embedded import free_port

CHROMIUM_NAMES = ("chromium", "chromium-browser")


def find_chromium() -> str | None:
    for name in CHROMIUM_NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


class Browser:
    """One headless Chromium with one page; call() sends a DevTools command and waits for it."""

    def __init__(self, executable: str):
        self.port = free_port()
        self.profile = tempfile.mkdtemp(prefix="tracker-chromium-")
        self.process = start(
            [
                executable,
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--disable-extensions",
                "--disable-background-networking",
                f"--remote-debugging-port={self.port}",
                "--remote-debugging-address=127.0.0.1",
                f"--user-data-dir={self.profile}",
                "--window-size=1280,1600",
                "about:blank",
            ],
            output=subprocess.DEVNULL,
        )
        self._ids = itertools.count(1)
        self._exit = contextlib.ExitStack()
        self.ws = self._exit.enter_context(
            connect(self._page_target(), max_size=64 * 1024 * 1024, open_timeout=20)
        )
        self.call("Page.enable")
        self.call("Runtime.enable")

    def _page_target(self, timeout_s: float = 30.0) -> str:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/json/list", timeout=2) as res:
                    for target in json.load(res):
                        if target.get("type") == "page":
                            return target["webSocketDebuggerUrl"]
            except OSError:
                pass
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise RuntimeError("Chromium did not open its DevTools port")
            time.sleep(0.1)

    def call(self, method: str, **params) -> dict:
        call_id = next(self._ids)
        self.ws.send(json.dumps({"id": call_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv(timeout=30))
            if message.get("id") == call_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})

    def evaluate(self, expression: str):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"page error: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout_s: float = 30.0):
        """Evaluate EXPRESSION until it is truthy; return its value (raise after TIMEOUT_S)."""
        deadline = time.monotonic() + timeout_s
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"still false after {timeout_s} s: {expression}")
            time.sleep(0.1)

    def navigate(self, url: str) -> None:
        self.call("Page.navigate", url=url)
        self.wait_for("document.readyState === 'complete'")

    def screenshot(self, path: Path) -> None:
        data = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))

    def close(self) -> None:
        try:
            self._exit.close()
        finally:
            stop_process(self.process)
            shutil.rmtree(self.profile, ignore_errors=True)
