"""A real headless Chromium (Debian's ``chromium`` + ``chromium-driver``) driven by Selenium.

The driver and the browser are given by path, so Selenium downloads nothing. One browser per
window width serves every page of the session (starting one costs seconds, loading a page a
fraction of one); a browser that failed is dropped, the next page starts a fresh one.
"""

from __future__ import annotations

import atexit
import base64
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"


def available() -> bool:
    return Path(CHROMIUM).is_file() and Path(CHROMEDRIVER).is_file()


@dataclass
class PageCheck:
    """What a page showed: its console messages, the ids of its sections, its images, a screenshot."""

    console: list[dict]
    section_ids: list[str]
    images: list[dict]
    header: dict[str, str]
    top_k: list[dict[str, str]]   # the rows of the top evaluations table, by column name
    text: str                     # the page's visible text
    screenshot: Path
    measured: object = None       # what open_page's ``script`` returned

    def errors(self) -> list[dict]:
        """Console messages at warning level or worse."""
        return [m for m in self.console if m.get("level") in ("SEVERE", "WARNING")]


_BROWSERS: dict[int, Any] = {}


def _browser(width: int) -> Any:
    """The session's headless Chromium of window ``width``, started on first use."""
    if width not in _BROWSERS:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM
        for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    f"--window-size={width},1000", "--disable-background-networking", "--no-first-run"):
            options.add_argument(arg)
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        _BROWSERS[width] = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    return _BROWSERS[width]


@atexit.register
def quit_all() -> None:
    """Quit every browser of this process (at the session's end: an xdist worker leaves without
    running ``atexit`` handlers, which would leave its Chromium and chromedriver running)."""
    while _BROWSERS:
        _BROWSERS.popitem()[1].quit()


def open_page(path: Path, screenshot: Path, width: int = 1280, script: str | None = None) -> PageCheck:
    """Load ``path`` (a file) in headless Chromium; screenshot the whole page to ``screenshot``.
    ``script``: JavaScript run on the loaded page (images decoded), its ``return`` kept as ``measured``.
    ``console`` holds this page's messages only (the earlier pages' are read and dropped first)."""
    driver = _browser(width)
    try:
        driver.get_log("browser")  # the previous page's messages
        driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})  # as a fresh browser's window
        driver.get(path.absolute().as_uri())
        driver.execute_async_script(
            "const done = arguments[arguments.length - 1];"
            "Promise.all([...document.images].map(i => i.decode().catch(() => null))).then(() => done(true));")
        images = driver.execute_script(
            "return [...document.images].map(i => ({id: i.id, complete: i.complete, "
            "width: i.naturalWidth, height: i.naturalHeight}));")
        section_ids = driver.execute_script("return [...document.querySelectorAll('section')].map(s => s.id);")
        header = driver.execute_script(
            "return Object.fromEntries([...document.querySelectorAll('#header tr')]"
            ".map(r => [r.querySelector('th').textContent, r.querySelector('td').textContent]));")
        top_k = driver.execute_script(
            "const t = document.querySelector('#top-k table'); if (!t) return [];"
            "const cols = [...t.querySelectorAll('th')].map(h => h.textContent);"
            "return [...t.querySelectorAll('tbody tr')].map(r => Object.fromEntries("
            "[...r.querySelectorAll('td')].map((d, i) => [cols[i], d.textContent])));")
        text = driver.execute_script("return document.body.innerText;")
        measured = driver.execute_script(script) if script else None
        shot = driver.execute_cdp_cmd("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True})
        screenshot.write_bytes(base64.b64decode(shot["data"]))
        console = driver.get_log("browser")
    except BaseException:
        _BROWSERS.pop(width, None)
        driver.quit()
        raise
    return PageCheck(console, section_ids, images, header, top_k, text, screenshot, measured)
