"""Headless Chromium driven by Selenium through Debian's chromedriver (apt: chromium, chromium-driver).

Tests use the `browser` fixture (import it into the test module) or `Browser()` directly:

    browser.navigate(url)                      # waits for the load event
    browser.wait_for("js expression")          # until truthy; returns its value
    browser.evaluate("js expression")          # its value
    browser.run("statements; return x")        # a script body (Selenium's execute_script)
    browser.screenshot(path)                   # the whole page at the current width
    browser.console_errors()                   # SEVERE console lines since the last call

Scripts run through WebDriver, outside the page's Content-Security-Policy, so tests can probe a page
that forbids inline scripts and eval.
"""

from __future__ import annotations

import base64
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.support.ui import WebDriverWait

CHROMIUM_NAMES = ("chromium", "chromium-browser")
DESKTOP_WIDTH = 1280
PHONE_WIDTH = 400


def find_chromium() -> str | None:
    for name in CHROMIUM_NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


def find_chromedriver() -> str | None:
    return shutil.which("chromedriver")


# In CI a missing browser is a failure, not a skip.
needs_chromium = pytest.mark.skipif(
    (find_chromium() is None or find_chromedriver() is None) and os.environ.get("CI") != "true",
    reason="Debian's chromium and chromium-driver are not installed (make deps installs them)",
)


class Browser:
    """One headless Chromium with one page, WIDTH x HEIGHT CSS pixels; PHONE emulates a touch
    device (mobile viewport rules) at that width."""

    def __init__(self, width: int = DESKTOP_WIDTH, height: int = 1000, phone: bool = False):
        self.profile = tempfile.mkdtemp(prefix="tracker-chromium-")
        options = webdriver.ChromeOptions()
        options.binary_location = find_chromium() or "chromium"
        for flag in (
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--disable-extensions",
            "--disable-background-networking",
            "--hide-scrollbars",
            f"--user-data-dir={self.profile}",
            f"--window-size={width},{height}",
        ):
            options.add_argument(flag)
        if phone:
            options.add_experimental_option(
                "mobileEmulation", {"deviceMetrics": {"width": width, "height": height, "pixelRatio": 1}}
            )
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        # The driver is named explicitly so Selenium never goes looking for one on the network.
        service = Service(executable_path=find_chromedriver() or "chromedriver")
        try:
            self.driver = webdriver.Chrome(options=options, service=service)
        except Exception:
            shutil.rmtree(self.profile, ignore_errors=True)
            raise
        self.driver.set_script_timeout(30)
        self.driver.set_page_load_timeout(30)

    def navigate(self, url: str) -> None:
        self.driver.get(url)  # returns after the load event

    def run(self, script: str, *args):
        """A script body; `return` gives its value."""
        return self.driver.execute_script(script, *args)

    def evaluate(self, expression: str):
        return self.run(f"return ({expression});")

    def wait_for(self, expression: str, timeout_s: float = 30.0):
        """Evaluate EXPRESSION until it is truthy; return its value (fail after TIMEOUT_S)."""
        try:
            return WebDriverWait(self.driver, timeout_s, poll_frequency=0.1).until(
                lambda _driver: self.evaluate(expression)
            )
        except TimeoutException:
            raise AssertionError(f"still false after {timeout_s} s: {expression}") from None

    def click(self, selector: str) -> None:
        self.driver.find_element("css selector", selector).click()

    def screenshot(self, path: Path) -> None:
        """The whole page, not just the viewport, at the current width."""
        shot = self.driver.execute_cdp_cmd(
            "Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True}
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(shot["data"]))

    def console_errors(self) -> list[str]:
        """Console errors (and failed loads) since the last call."""
        return [e["message"] for e in self.driver.get_log("browser") if e["level"] == "SEVERE"]

    def overflow_x(self) -> int:
        """How many CSS pixels the page is wider than its viewport (0: no sideways scroll)."""
        return self.evaluate(
            "Math.max(document.documentElement.scrollWidth, document.body.scrollWidth)"
            " - document.documentElement.clientWidth"
        )

    def close(self) -> None:
        try:
            self.driver.quit()
        finally:
            shutil.rmtree(self.profile, ignore_errors=True)


def log_in(browser: Browser, base: str, token: str, project: str) -> None:
    """Log in at BASE/admin through its form with TOKEN; wait for PROJECT's link on the index."""
    browser.navigate(f"{base}/admin")
    browser.run(
        "document.querySelector('input[name=token]').value = arguments[0];"
        "document.querySelector('form.login').submit();",
        token,
    )
    browser.wait_for(f"!!document.querySelector('a[href=\"/admin/{project}\"]')")


@pytest.fixture
def browser():
    """A desktop-width headless Chromium, closed after the test."""
    instance = Browser()
    yield instance
    instance.close()


@pytest.fixture
def phone_browser():
    """A 400 px wide phone-emulating headless Chromium, closed after the test."""
    instance = Browser(width=PHONE_WIDTH, height=900, phone=True)
    yield instance
    instance.close()
