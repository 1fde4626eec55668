"""A real headless Chromium (Debian's `chromium` + `chromium-driver`) driven by Selenium
against the app served on 127.0.0.1. Without them every browser test skips with one reason;
`make browser` installs them where apt can."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

CHROMIUM = os.environ.get("AUTONOTE_TEST_CHROMIUM") or shutil.which("chromium") or ""
CHROMEDRIVER = os.environ.get("AUTONOTE_TEST_CHROMEDRIVER") or shutil.which("chromedriver") or ""
# The flags a headless start needs as root on a machine with no network: no sandbox, and
# none of Chromium's own background connections (component updates, sync, field trials).
CHROMIUM_FLAGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1400,900",
]


def browser_missing() -> str | None:
    """Why the browser tests cannot run here, or None."""
    if importlib.util.find_spec("selenium") is None:
        return "selenium is not installed (pip install -e '.[dev]')"
    if not (CHROMIUM and CHROMEDRIVER):
        return (
            "no headless browser: Debian's chromium and chromium-driver are not installed "
            "(make browser, or apt-get install chromium chromium-driver)"
        )
    return None


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One Chromium per test module; its performance log lists every request it makes."""
    reason = browser_missing()
    if reason:
        pytest.skip(reason)
    os.environ.setdefault("SE_OFFLINE", "true")  # Selenium Manager must never download
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium')}")
    options.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def requested_urls(driver: Any) -> list[str]:
    """URLs the browser sent a request to since the last call (the log empties as it is
    read); a request the page's Content-Security-Policy blocked never left the browser."""
    urls: dict[str, str] = {}
    blocked = set()
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        params = message.get("params", {})
        if message["method"] == "Network.requestWillBeSent":
            urls[params["requestId"]] = params["request"]["url"]
        elif message["method"] == "Network.loadingFailed" and params.get("blockedReason"):
            blocked.add(params["requestId"])
    return [url for request_id, url in urls.items() if request_id not in blocked]


class Sentinel:
    """An HTTP server on another origin that records every request: a note or an answer
    pointing the browser here must never reach it."""

    def __init__(self) -> None:
        self.hits: list[str] = []
        hits = self.hits

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                hits.append(self.path)
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture(scope="module")
def sentinel() -> Iterator[Sentinel]:
    server = Sentinel()
    yield server
    server.close()
