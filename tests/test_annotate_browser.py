"""The annotation page in a real browser (headless Chromium via Selenium): clicks, keys 1-5, the database.

Needs Debian's `chromium` and `chromium-driver` (scripts/install-system-deps.sh, run by `make setup`).
Under CI=true a missing browser is a failure, not a skip.
"""

import os
import shutil
import sqlite3
import struct
import zlib
from pathlib import Path

import pytest

from tests.annotation_helpers import running_server, setup_server_db

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver") or ("/usr/bin/chromedriver" if Path("/usr/bin/chromedriver").exists() else None)


def _png(width: int, height: int, rgb=(40, 120, 200)) -> bytes:
    """A solid-colour PNG, written by hand so the test needs no imaging library."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    raw = b"".join(b"\x00" + bytes(rgb) * width for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


@pytest.fixture
def browser(tmp_path):
    if not (CHROMIUM and CHROMEDRIVER):
        # make setup installs them (scripts/install-system-deps.sh): missing means the setup is broken
        pytest.fail("chromium / chromedriver not installed: run scripts/install-system-deps.sh (make setup)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--no-first-run", "--disable-default-apps", "--disable-extensions", f"--user-data-dir={tmp_path / 'profile'}",
                 "--window-size=390,844"):   # a phone-sized screen
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


def test_page_answers_with_clicks_and_keys_and_the_database_has_them(tmp_path, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    images = tmp_path / "images"
    images.mkdir()
    (images / "img_000.jpg").write_bytes(_png(320, 240))   # served as image/jpeg; browsers sniff the PNG
    (images / "img_002.jpg").write_bytes(_png(320, 240, (200, 80, 40)))
    params, database, tokens = setup_server_db(tmp_path, 6)
    wait = WebDriverWait(browser, 30)

    def current_item():
        return browser.execute_script("return document.body.dataset.itemId || null")

    with running_server(database, params, images) as (base, _):
        browser.get(f"{base}/#token={tokens['ann1']}")
        wait.until(lambda d: current_item() is not None)
        assert "token" not in browser.current_url             # the token leaves the address bar
        assert browser.find_element(By.ID, "progress").text == "0 / 6"
        wait.until(lambda d: d.execute_script("const i = document.getElementById('image'); return i.complete && i.naturalWidth > 0"))
        assert browser.find_element(By.ID, "image").is_displayed()
        texts = [browser.find_element(By.ID, f"text-{n}") for n in (1, 2)]
        assert {t.get_attribute("innerHTML") for t in texts} == {"A dog &lt;0&gt; sits <b>on</b> the mat &amp; rug.",
                                                                 "A dog &lt;0&gt; sits <b>under</b> the mat &amp; rug."}
        assert [b.text for b in browser.find_elements(By.CSS_SELECTOR, "#choices button")] == [
            "1 The first, not the second", "2 The second, not the first", "3 Both", "4 Neither", "5 I cannot tell"]
        # phone-sized: nothing wider than the screen, every button on screen width
        assert browser.execute_script("return document.documentElement.scrollWidth <= window.innerWidth")
        for button in browser.find_elements(By.CSS_SELECTOR, "#choices button"):
            assert button.rect["x"] >= 0 and button.rect["x"] + button.rect["width"] <= browser.execute_script("return window.innerWidth")
        shots = Path(os.environ.get("FOILFORGE_SCREENSHOT_DIR", tmp_path))   # set it to keep the screenshots
        shots.mkdir(parents=True, exist_ok=True)
        browser.save_screenshot(str(shots / "annotate-page.png"))

        sent = []
        actions = [("click", "first"), ("key", "2"), ("click", "both"), ("key", "5"), ("key", "4"), ("key", "1")]
        key_choice = {"1": "first", "2": "second", "3": "both", "4": "neither", "5": "cannot_tell"}
        for n, (how, what) in enumerate(actions):
            item = current_item()
            if item == "relations:coco:1":       # img_001.jpg does not exist: a placeholder, not a broken page
                wait.until(lambda d: d.find_element(By.ID, "placeholder").is_displayed())
                assert "img_001.jpg" in browser.find_element(By.ID, "placeholder").text
                assert not browser.find_element(By.ID, "image").is_displayed()
                browser.save_screenshot(str(shots / "annotate-placeholder.png"))
            if how == "click":
                browser.find_element(By.CSS_SELECTOR, f'#choices button[data-choice="{what}"]').click()
                sent.append((item, what))
            else:
                browser.find_element(By.TAG_NAME, "body").send_keys(what)
                sent.append((item, key_choice[what]))
            if n < len(actions) - 1:
                wait.until(lambda d: current_item() not in (None, item))
                assert browser.find_element(By.ID, "progress").text == f"{n + 1} / 6"
        wait.until(lambda d: d.find_element(By.ID, "done").is_displayed())
        assert browser.find_element(By.ID, "progress").text == "6 / 6"

    conn = sqlite3.connect(database)
    stored = conn.execute("SELECT a.item_id, a.choice FROM answers a JOIN annotators n USING (annotator_id) "
                          "WHERE n.name = 'ann1' ORDER BY a.answered_at, a.rowid").fetchall()
    conn.close()
    assert stored == sent
    assert sorted(item for item, _ in sent) == [f"relations:coco:{i}" for i in range(6)]
