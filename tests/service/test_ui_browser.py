"""The web UI of `gristmill serve` in headless Debian chromium, against the real server (a subprocess).

One walk through the page as a user would do it: dataset and export paths, three ops added from the catalogue
(one of them with Enter in the search box), a param set through its generated form (a bad value first: the
server's message must appear at that field), live validation, the YAML view, a preview of the input, "try it"
on the previewed rows (removed rows and their reason), a run watched to the end, the per-op table checked
against the job's report.json fetched with httpx, the HTML report opened from its link, the jobs list, and a
pasted YAML recipe loaded back into the builder. Screenshots of each step go to pytest's tmp_path and to
/tmp/gristmill-screenshots/ui-*.png. Skipped without /usr/bin/chromium unless GRISTMILL_REQUIRE_BROWSER=1."""
from __future__ import annotations

import base64
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "analysis"))
from browser import (HUMAN_COPY_DIR, full_page_png, require_browser, screenshot_stats,  # noqa: E402
                     start_driver)

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "examples" / "data" / "cc-sample.jsonl.gz"
OPS = ["whitespace_normalization_mapper", "words_num_filter", "document_deduplicator"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def served(tmp_path):
    """`gristmill serve` in a subprocess over a data root holding the sample: (base URL, data root)."""
    require_browser()
    httpx = pytest.importorskip("httpx")
    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    root = tmp_path / "root"
    root.mkdir()
    shutil.copy(SAMPLE, root / "cc-sample.jsonl.gz")
    port = _free_port()
    log = open(tmp_path / "serve.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "gristmill.cli", "serve", "--port", str(port),
                             "--data-root", str(root), "--state-dir", str(root / "state")],
                            cwd=root, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{base}/api/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"gristmill serve did not start:\n{(tmp_path / 'serve.log').read_text()}")
            time.sleep(0.2)
        yield base, root
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        log.close()


class Shots:
    """Screenshots of the page (from its top) or of one element, kept in tmp_path and copied for humans."""

    def __init__(self, driver, tmp_path: Path):
        self.driver, self.dir = driver, tmp_path / "screenshots"
        self.dir.mkdir(exist_ok=True)
        self.taken = {}

    def __call__(self, name: str, element=None) -> Path:
        d = self.driver
        d.execute_script("window.scrollTo(0, 0)")  # sticky bars at their place
        if element is None:
            png = full_page_png(d)
        else:  # the whole element, also what lies below the window
            x, y, w, h = d.execute_script(
                "var r = arguments[0].getBoundingClientRect();"
                "return [r.left + window.scrollX, r.top + window.scrollY, r.width, r.height];", element)
            pad = 10
            shot = d.execute_cdp_cmd("Page.captureScreenshot", {
                "format": "png", "captureBeyondViewport": True, "fromSurface": True,
                "clip": {"x": max(0, x - pad), "y": max(0, y - pad), "width": w + 2 * pad,
                         "height": min(h + 2 * pad, 16000), "scale": 1}})
            png = base64.b64decode(shot["data"])
        path = self.dir / f"ui-{name}.png"
        path.write_bytes(png)
        stats = screenshot_stats(png)
        assert stats["levels"] >= 16 and stats["non_white"] > 0.01, f"blank screenshot {name}: {stats}"
        self.taken[name] = stats
        try:
            HUMAN_COPY_DIR.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, HUMAN_COPY_DIR / path.name)
        except OSError:
            pass
        return path


def _severe(entries, ignore=()):
    return [e for e in entries if e.get("level") == "SEVERE" and not any(s in e.get("message", "") for s in ignore)]


def test_ui_end_to_end(served, tmp_path):
    import httpx
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait

    base, root = served
    t0 = time.monotonic()
    d = start_driver(1400, 1100)
    d.set_page_load_timeout(60)
    shot = Shots(d, tmp_path)
    # a condition that reads elements the page re-renders meanwhile (the chain after a YAML paste) tries again
    wait = WebDriverWait(d, 30, poll_frequency=0.1, ignored_exceptions=[StaleElementReferenceException])

    def css(sel, within=None):
        return (within or d).find_element(By.CSS_SELECTOR, sel)

    def text(sel):
        return d.execute_script("var e=document.querySelector(arguments[0]);return e?e.textContent:null;", sel)

    def retype(el, value):
        el.send_keys(Keys.CONTROL, "a")
        el.send_keys(value)  # typing over the selection fires input events (clear() does not)

    def validation_is(prefix):
        wait.until(lambda _: (text("#validation") or "").strip().startswith(prefix))

    try:
        d.get(base + "/")
        wait.until(lambda _: len(d.find_elements(By.CSS_SELECTOR, "#cat-list .cat-op")) > 20)
        wait.until(lambda _: "connected" in (text("#health") or ""))
        n_ops = len(httpx.get(f"{base}/api/ops").json()["ops"])
        assert text("#cat-count").strip() == f"{n_ops} of {n_ops} ops"

        # -- the recipe: settings, three ops from the catalogue ---------------------------------------
        css("#s-dataset_path").send_keys("cc-sample.jsonl.gz")
        css("#s-export_path").send_keys("out/clean.jsonl")
        search = css("#op-search")
        for name in OPS:
            retype(search, name)
            wait.until(lambda _: css("#cat-list .cat-op").get_attribute("data-op") == name)
            if name == "words_num_filter":
                search.send_keys(Keys.ENTER)  # the keyboard path: Enter adds the first match
            else:
                css(f'#cat-list .cat-op[data-op="{name}"]').click()
            wait.until(lambda _, n=name: d.find_elements(By.CSS_SELECTOR, f'#chain .op-card[data-op="{n}"] .op-body'))
        cards = d.find_elements(By.CSS_SELECTOR, "#chain .op-card")
        assert [c.get_attribute("data-op") for c in cards] == OPS
        # the forms come from the JSON schemas: kinds, defaults, descriptions, an enum as a select
        wnf = css('#chain .op-card[data-op="words_num_filter"]')
        min_num = css('input[data-param="min_num"]', wnf)
        assert min_num.get_attribute("value") == "10"
        assert css('input[data-param="tokenization"]', wnf).get_attribute("type") == "checkbox"
        assert "Minimum number of words" in css('.param[data-param="min_num"] .help', wnf).text
        assert css('label[for="%s"]' % min_num.get_attribute("id"), wnf).text.startswith("min_num")
        dedup = css('#chain .op-card[data-op="document_deduplicator"]')
        assert css('select[data-param="unicode_normalization"]', dedup).tag_name == "select"
        validation_is("✓")

        # a bad value: the server's message appears at that very field
        retype(min_num, "fifty")
        validation_is("✗")
        err = css('.param[data-param="min_num"] .err', wnf)
        wait.until(lambda _: err.is_displayed() and "integer" in err.text)
        assert min_num.get_attribute("aria-invalid") == "true"
        assert err.get_attribute("id") in min_num.get_attribute("aria-describedby")
        assert "process[1].words_num_filter.min_num" in css("#yaml-errors").text
        shot("02-invalid-param", css("#recipe"))

        retype(min_num, "50")
        validation_is("✓ Valid recipe · 3 ops")
        assert not err.is_displayed() and min_num.get_attribute("aria-invalid") is None
        yaml_text = css("#yaml-text").get_attribute("value")
        assert "dataset_path: cc-sample.jsonl.gz" in yaml_text and "export_path: out/clean.jsonl" in yaml_text
        assert "  - words_num_filter:\n      min_num: 50\n" in yaml_text
        assert "  - document_deduplicator: {}" in yaml_text
        # reorder keeps the YAML in sync; put it back
        css(".up", dedup).click()
        wait.until(lambda _: css("#yaml-text").get_attribute("value").index("document_deduplicator")
                   < css("#yaml-text").get_attribute("value").index("words_num_filter"))
        css('#chain .op-card[data-op="document_deduplicator"] .down').click()
        wait.until(lambda _: css("#yaml-text").get_attribute("value") == yaml_text)
        validation_is("✓ Valid recipe · 3 ops")
        retype(search, "filter")
        search.send_keys(Keys.BACKSPACE * 6)  # the whole catalogue again
        wait.until(lambda _: text("#cat-count").strip() == f"{n_ops} of {n_ops} ops")
        shot("01-recipe")

        # -- preview and try it -------------------------------------------------------------------------
        retype(css("#preview-n"), "20")
        css("#preview-btn").click()
        wait.until(lambda _: len(d.find_elements(By.CSS_SELECTOR, "#preview-out table.rows tbody tr")) == 20)
        first = css("#preview-out table.rows tbody tr .text-cell")
        assert first.text.startswith("A New Home?")
        more = css("#preview-out .text-cell .link-btn")
        short_len = len(more.find_element(By.XPATH, "..").text)
        more.click()
        assert more.get_attribute("aria-expanded") == "true"
        assert len(more.find_element(By.XPATH, "..").text) > short_len
        # "update as the recipe changes" is on: try-it runs by itself once rows are there
        wait.until(lambda _: d.find_elements(By.CSS_SELECTOR, '#try-out tr[data-op="words_num_filter"]'))
        row = css('#try-out tr[data-op="words_num_filter"]')
        removed = int(css('td[data-col="removed"]', row).get_attribute("data-value"))
        assert removed > 0
        assert int(css('td[data-col="rows_in"]', row).get_attribute("data-value")) == 20
        assert int(css('td[data-col="rows_out"]', row).get_attribute("data-value")) == 20 - removed
        gone = css('#try-out details.removed-op[data-op="words_num_filter"]')
        wait.until(lambda _: len(gone.find_elements(By.CSS_SELECTOR, "table.removed tbody tr")) == removed)
        assert [r.text for r in gone.find_elements(By.CSS_SELECTOR, ".reason")] == ["num_words < 50"] * removed
        out_rows = d.find_elements(By.CSS_SELECTOR, "#try-out > table.rows tbody tr")
        assert text("#try-count").strip().startswith(f"· 20 rows in → {len(out_rows)} out")
        shot("03-preview-try", css("#data"))

        # -- run and watch ----------------------------------------------------------------------------------
        css("#job-name").send_keys("ui walk")
        css("#run-btn").click()
        wait.until(lambda _: css("#job-view").is_displayed())
        job_id = d.execute_script("return decodeURIComponent(location.hash.replace('#job=', ''))")
        assert job_id
        WebDriverWait(d, 90, poll_frequency=0.2).until(lambda _: text("#job-state") in ("done", "failed", "cancelled"))
        assert text("#job-state") == "done", text("#job-error")
        wait.until(lambda _: css("#job-report").is_displayed())
        wait.until(lambda _: "clean.jsonl" in css("#job-outputs").text)
        wait.until(lambda _: "num_words < 50" in css("#job-ops").text)  # report.json's reasons arrived
        assert "rows out" in css("#job-ops").text
        assert css("#prog-fill").value_of_css_property("width") != "0px"
        wait.until(lambda _: "exported" in css("#job-log").text or "rows out" in css("#job-log").text)
        shot("04-job", css("#run"))
        shot("07-overview")

        # the per-op table says what report.json says
        rep = httpx.get(f"{base}/api/jobs/{job_id}/report").json()
        ui_rows = d.find_elements(By.CSS_SELECTOR, "#job-ops tbody tr")
        assert len(ui_rows) == len(rep["ops"])
        for o, tr in zip(rep["ops"], ui_rows):
            assert tr.get_attribute("data-op") == o["op"]
            for col in ("rows_in", "rows_out", "removed", "rejected"):
                cell = css(f'td[data-col="{col}"]', tr)
                assert int(cell.get_attribute("data-value")) == o[col], (o["op"], col)
                assert cell.text == f"{o[col]:,}"
        wnf_rep = next(o for o in rep["ops"] if o["op"] == "words_num_filter")
        assert wnf_rep["removed"] > 0 and rep["rows_out"] < rep["rows_read"] == 179

        # the jobs list has it
        wait.until(lambda _: d.find_elements(By.CSS_SELECTOR, f'#jobs-out tr[data-job="{job_id}"]'))
        jrow = css(f'#jobs-out tr[data-job="{job_id}"]')
        assert css(".state", jrow).get_attribute("textContent") == "done" and "ui walk" in jrow.text
        shot("06-jobs", css("#jobs"))

        # paste a recipe as YAML: validated as text, loaded back into the builder
        pasted = ("# pasted\ndataset_path: cc-sample.jsonl.gz\nexport_path: out/pasted.jsonl\nnp: 1\n"
                  "process:\n  - words_num_filter: {min_num: 30}   # looser\n  - text_length_filter:\n"
                  "      min_len: 200\n")
        d.execute_script("var t=document.getElementById('yaml-text'); t.value=arguments[0];"
                         "t.dispatchEvent(new Event('input', {bubbles: true}));", pasted)
        wait.until(lambda _: [c.get_attribute("data-op") for c in d.find_elements(By.CSS_SELECTOR, "#chain .op-card")]
                   == ["words_num_filter", "text_length_filter"])
        assert css('#chain .op-card[data-op="words_num_filter"] input[data-param="min_num"]').get_attribute("value") == "30"
        assert css("#s-export_path").get_attribute("value") == "out/pasted.jsonl"
        assert css("#yaml-text").get_attribute("value") == pasted  # the text stays as written
        assert "edited as text" in text("#yaml-mode")
        validation_is("✓ Valid recipe · 2 ops")

        console = d.get_log("browser")
        assert not _severe(console), _severe(console)

        # the report link opens the HTML report
        link = css("#report-link")
        assert link.get_attribute("href").endswith(f"/api/jobs/{job_id}/report.html")
        main = d.current_window_handle
        link.click()
        WebDriverWait(d, 20).until(lambda _: len(d.window_handles) == 2)
        d.switch_to.window(next(h for h in d.window_handles if h != main))
        WebDriverWait(d, 20).until(lambda _: d.execute_script("return document.readyState") == "complete")
        body = d.find_element(By.TAG_NAME, "body").text
        assert "words_num_filter" in body and "document_deduplicator" in body
        shot("05-report")
        report_console = d.get_log("browser")
        d.close()
        d.switch_to.window(main)
        # (a page without its own icon makes chromium ask for /favicon.ico)
        assert not _severe(report_console, ignore=("favicon.ico",)), _severe(report_console)
    finally:
        d.quit()
    assert time.monotonic() - t0 < 90
