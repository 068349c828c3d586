"""Open an HTML page in headless Debian chromium (selenium) and check that it really renders.

Reusable by any test (`sys.path` gets `tests/analysis` from its conftest; from elsewhere insert it):

    from browser import open_in_browser
    result = open_in_browser(html_path, tmp_path / "shot.png", filter_query="alert")

`open_in_browser` fails the test on any SEVERE console entry (a script error, a resource blocked by the
page's Content-Security-Policy or not found), on a blank screenshot, and on a `figure.chart` that drew
(almost) nothing. It skips the test when `/usr/bin/chromium` is missing, unless
GRISTMILL_REQUIRE_BROWSER=1 (CI), where a missing browser is a failure.
"""
from __future__ import annotations

import base64
import io
import os
import shutil
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
HUMAN_COPY_DIR = Path("/tmp/gristmill-screenshots")
MAX_SHOT_HEIGHT = 16000  # px: longer pages are cut (chromium's texture limit is 16384)

# per chart: the SVG elements that draw something
_CHARTS_JS = """
return Array.from(document.querySelectorAll('figure.chart')).map(function(f){
  var r = f.getBoundingClientRect(), s = f.querySelector('svg'), sr = s ? s.getBoundingClientRect() : null;
  return {name: f.getAttribute('data-chart') || '',
          shapes: f.querySelectorAll('svg path, svg rect, svg line, svg polyline, svg polygon, svg circle, svg ellipse, svg use, svg text, svg image').length,
          width: sr ? sr.width : 0, height: sr ? sr.height : 0, error: f.classList.contains('chart-error')};
});
"""
_ROWS_JS = """
var rows = Array.from(document.querySelectorAll(arguments[0]));
return [rows.length, rows.filter(function(r){ return r.offsetParent !== null || r.getClientRects().length > 0; }).length,
        rows.filter(function(r){ return !r.hidden; }).length];
"""


def browser_available() -> bool:
    return os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)


def require_browser() -> None:
    """Skip (or, with GRISTMILL_REQUIRE_BROWSER=1, fail) when Debian's chromium is not installed."""
    if browser_available():
        return
    msg = (f"{CHROMIUM} / {CHROMEDRIVER} missing: apt-get install -y chromium chromium-driver")
    if os.environ.get("GRISTMILL_REQUIRE_BROWSER") == "1":
        pytest.fail(msg + " (GRISTMILL_REQUIRE_BROWSER=1)")
    pytest.skip(msg)


def start_driver(width: int = 1400, height: int = 3000):
    require_browser()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              f"--window-size={width},{height}", "--hide-scrollbars", "--force-device-scale-factor=1",
              "--allow-file-access-from-files", "--no-first-run", "--disable-extensions",
              "--disable-background-networking", "--lang=en-US"):
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)


def screenshot_stats(png: bytes) -> dict:
    """Size and pixel spread of a PNG (Pillow comes with matplotlib)."""
    from PIL import Image, ImageStat

    img = Image.open(io.BytesIO(png)).convert("L")
    hist = img.histogram()
    total = sum(hist)
    st = ImageStat.Stat(img)
    return {"size": img.size, "levels": sum(1 for h in hist if h), "stddev": st.stddev[0],
            "non_white": 1 - hist[255] / total if total else 0.0}


def full_page_png(driver) -> bytes:
    """The whole page (not just the window) as PNG, through the DevTools protocol."""
    m = driver.execute_cdp_cmd("Page.getLayoutMetrics", {})
    size = m.get("cssContentSize") or m["contentSize"]
    # the content's own height (a short page is not padded with the window's white)
    bottom = driver.execute_script(
        "var b=document.body; return b ? Math.ceil(b.getBoundingClientRect().bottom + window.scrollY"
        " + parseFloat(getComputedStyle(b).marginBottom || 0)) : 0;")
    w = int(size["width"])
    h = min(max(int(bottom or size["height"]), 100), int(size["height"]), MAX_SHOT_HEIGHT)
    shot = driver.execute_cdp_cmd("Page.captureScreenshot", {
        "format": "png", "captureBeyondViewport": True, "fromSurface": True,
        "clip": {"x": 0, "y": 0, "width": w, "height": h, "scale": 1}})
    return base64.b64decode(shot["data"])


def open_in_browser(html_path, screenshot_path, *, filter_query: str | None = None,
                    filter_selector: str = "#gm-filter", row_selector: str = "table.data tbody tr",
                    min_shapes: int = 8, allow_severe: bool = False) -> dict:
    """Load `html_path` from file://, check it, save a full-page screenshot (also copied to
    /tmp/gristmill-screenshots/ for humans) and return what was seen:

    title, console (all entries), charts ({data-chart: shapes drawn}), chart_boxes ({name: (w, h)}),
    screenshot (path), pixels (screenshot_stats), rows_total, and with `filter_query`:
    rows_visible_after_filter, rows_visible_after_clear, filter_info (the match text, if any).
    """
    html_path, screenshot_path = Path(html_path).resolve(), Path(screenshot_path)
    driver = start_driver()
    try:
        driver.get(html_path.as_uri())
        driver.execute_script("return document.readyState")
        title = driver.title
        charts = driver.execute_script(_CHARTS_JS)
        total, visible, _ = driver.execute_script(_ROWS_JS, row_selector)
        result = {"title": title, "rows_total": total, "rows_visible": visible}
        if filter_query is not None:
            from selenium.webdriver.common.by import By

            box = driver.find_element(By.CSS_SELECTOR, filter_selector)
            box.clear()
            box.send_keys(filter_query)
            result["rows_visible_after_filter"] = driver.execute_script(_ROWS_JS, row_selector)[2]
            result["filter_info"] = driver.execute_script(
                "var e=document.getElementById('gm-filter-info');return e?e.textContent:null;")
            screenshot_path.parent.mkdir(parents=True, exist_ok=True)
            filtered = screenshot_path.with_name(screenshot_path.stem + "-filtered.png")
            filtered.write_bytes(driver.get_screenshot_as_png())
            _copy_for_humans(filtered)
            # clear it again (select all + delete: `clear()` does not fire an input event)
            from selenium.webdriver.common.keys import Keys

            box.send_keys(Keys.CONTROL, "a")
            box.send_keys(Keys.DELETE)
            result["rows_visible_after_clear"] = driver.execute_script(_ROWS_JS, row_selector)[2]
        png = full_page_png(driver)
        console = driver.get_log("browser")
    finally:
        driver.quit()
    screenshot_path.parent.mkdir(parents=True, exist_ok=True)
    screenshot_path.write_bytes(png)
    _copy_for_humans(screenshot_path)
    pixels = screenshot_stats(png)
    result.update(console=console, screenshot=str(screenshot_path), pixels=pixels,
                  charts={c["name"]: c["shapes"] for c in charts},
                  chart_boxes={c["name"]: (c["width"], c["height"]) for c in charts})
    severe = [e for e in console if e.get("level") == "SEVERE"]
    if severe and not allow_severe:
        raise AssertionError(f"SEVERE browser console entries: {severe}")
    if pixels["levels"] < 16 or pixels["stddev"] < 5 or pixels["non_white"] < 0.01:
        raise AssertionError(f"screenshot looks blank: {pixels}")
    for c in charts:
        if c["error"] or c["shapes"] < min_shapes or c["width"] < 50 or c["height"] < 30:
            raise AssertionError(f"chart {c['name']!r} did not render: {c}")
    return result


def _copy_for_humans(path: Path) -> None:
    try:
        HUMAN_COPY_DIR.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, HUMAN_COPY_DIR / path.name)
    except OSError:
        pass
