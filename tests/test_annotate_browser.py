"""The annotation page in a real browser (headless Chromium via Selenium): clicks, keys 1-5, the database;
the group page (two images, two texts): a pick per text by keys or clicks, the answer in the database and the dump.

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


def test_group_page_matches_each_text_to_an_image_by_keys_and_clicks(tmp_path, browser):
    """Two images (A, B) and two texts: keys and clicks pick an image per text, the pair of picks lands in the
    database as one answer, `dump --groups` writes it and validate decodes it with the seeded orders."""
    import csv
    import json

    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from foilforge.pipeline import validation as validate
    from tests.annotation_helpers import foilforge, grouped_records, write_jsonl

    images = tmp_path / "images"
    images.mkdir()
    for i, (own, partner) in enumerate((((40, 120, 200), (230, 160, 30)), ((60, 170, 90), (150, 60, 170)))):
        (images / f"img_{i:03d}.jpg").write_bytes(_png(320, 240, own))
        (images / f"partner_{i:03d}.jpg").write_bytes(_png(320, 240, partner))
    params, database, tokens = setup_server_db(tmp_path, 4, groups=3)   # the third group's images are missing on purpose
    wait = WebDriverWait(browser, 30)

    def current_item():
        return browser.execute_script("return document.body.dataset.itemId || null")

    def pressed(text):
        return [b.get_attribute("data-pick") for b in
                browser.find_elements(By.CSS_SELECTOR, f'.picks[data-text="{text}"] button[aria-pressed="true"]')]

    def active():
        return [li.get_attribute("id") for li in browser.find_elements(By.CSS_SELECTOR, "#group-texts li.active")]

    def letters(item_id):
        """(letter of the record's own image, of the partner image, text number of the caption, of the foil)"""
        image_0_first, caption_0_first = validate.group_orders(item_id, 0)
        return (("A", "B") if image_0_first else ("B", "A")), ((1, 2) if caption_0_first else (2, 1))

    sent = {}
    with running_server(database, params, images) as (base, _):
        browser.get(f"{base}/#token={tokens['ann1']}")
        wait.until(lambda d: current_item() is not None)
        assert browser.execute_script("return document.body.dataset.kind") == "group"
        assert browser.find_element(By.ID, "title").text == "Which image does each text describe?"
        assert browser.find_element(By.ID, "group-task").is_displayed() and not browser.find_element(By.ID, "task").is_displayed()
        assert browser.find_element(By.ID, "progress").text == "0 / 3"
        for name in ("image-a", "image-b"):
            wait.until(lambda d: d.execute_script(f"const i = document.getElementById('{name}'); return i.complete && i.naturalWidth > 0"))
            assert browser.find_element(By.ID, name).is_displayed()
        assert [f.text for f in browser.find_elements(By.CSS_SELECTOR, "#group-images figcaption")] == ["A", "B"]
        item = current_item()
        (own, partner), (caption_text, foil_text) = letters(item)
        html = {n: browser.find_element(By.ID, f"group-text-{n}-html").get_attribute("innerHTML") for n in (1, 2)}
        assert html[caption_text] == "A dog &lt;0&gt; sits <b>on</b> the mat &amp; rug."
        assert html[foil_text] == "A dog &lt;0&gt; sits <b>under</b> the mat &amp; rug."
        assert [b.text for b in browser.find_elements(By.CSS_SELECTOR, '.picks[data-text="1"] button')] == [
            "1 Image A", "2 Image B", "3 Both", "4 Neither", "5 Can't tell"]
        assert browser.execute_script("return document.documentElement.scrollWidth <= window.innerWidth")
        width = browser.execute_script("return window.innerWidth")
        for button in browser.find_elements(By.CSS_SELECTOR, ".picks button"):
            assert button.rect["x"] >= 0 and button.rect["x"] + button.rect["width"] <= width
        shots = Path(os.environ.get("FOILFORGE_SCREENSHOT_DIR", tmp_path))
        shots.mkdir(parents=True, exist_ok=True)
        browser.save_screenshot(str(shots / "annotate-group-page.png"))

        # group 1, keys: a pick, Backspace undoes it, then the right image for each text (letters, then digits)
        assert active() == ["group-text-1"]
        body = browser.find_element(By.TAG_NAME, "body")
        body.send_keys("4")
        assert pressed(1) == ["neither"] and active() == ["group-text-2"]
        body.send_keys("\ue003")                                        # Backspace
        assert pressed(1) == [] and active() == ["group-text-1"]
        answer = {caption_text: own, foil_text: partner}
        body.send_keys(answer[1].lower())
        assert pressed(1) == [answer[1]] and current_item() == item    # one text answered: nothing sent yet
        browser.save_screenshot(str(shots / "annotate-group-picked.png"))
        body.send_keys("12"[answer[2] == "B"])
        sent[item] = (answer[1], answer[2], "matched")
        wait.until(lambda d: current_item() not in (None, item))
        assert browser.find_element(By.ID, "progress").text == "1 / 3"
        assert pressed(1) == pressed(2) == [] and active() == ["group-text-1"]   # a fresh item starts clean

        # group 2, clicks: text 2 first (a click answers any text), then text 1; both texts to image A
        item = current_item()
        browser.find_element(By.CSS_SELECTOR, '.picks[data-text="2"] button[data-pick="A"]').click()
        assert pressed(2) == ["A"] and active() == ["group-text-1"]
        browser.find_element(By.CSS_SELECTOR, '.picks[data-text="1"] button[data-pick="A"]').click()
        sent[item] = ("A", "A", "other")
        wait.until(lambda d: current_item() not in (None, item))

        # group 3: its images are missing: placeholders naming the files; swapped by a click and a key
        item = current_item()
        wait.until(lambda d: d.find_element(By.ID, "placeholder-a" if letters(item)[0][1] == "A" else "placeholder-b").is_displayed())
        assert {"img_002.jpg", "partner_002.jpg"} <= set(browser.find_element(By.ID, "group-images").text.split())
        browser.save_screenshot(str(shots / "annotate-group-placeholder.png"))
        (own, partner), (caption_text, foil_text) = letters(item)
        answer = {caption_text: partner, foil_text: own}
        browser.find_element(By.CSS_SELECTOR, f'.picks[data-text="1"] button[data-pick="{answer[1]}"]').click()
        body.send_keys(answer[2].lower())
        sent[item] = (answer[1], answer[2], "swapped")
        wait.until(lambda d: d.find_element(By.ID, "done").is_displayed())
        assert browser.find_element(By.ID, "progress").text == "3 / 3"

    conn = sqlite3.connect(database)
    stored = conn.execute("SELECT a.item_id, a.choice, a.choice_2 FROM answers a JOIN annotators n USING (annotator_id) "
                          "WHERE n.name = 'ann1' ORDER BY a.item_id").fetchall()
    conn.close()
    assert stored == sorted((item, t1, t2) for item, (t1, t2, _) in sent.items())
    out = tmp_path / "annotations" / "relations.groups.csv"
    done = foilforge("annotate", "dump", "--groups", "--db", str(database), "--output", str(out))
    assert done.returncode == 0, done.stderr
    with open(out, newline="") as handle:
        rows = [(r["Input.item_id"], r["WorkerId"], r["Answer.text_1"], r["Answer.text_2"]) for r in csv.DictReader(handle)]
    assert rows == [(item, "ann1", t1, t2) for item, (t1, t2, _) in sorted(sent.items())]
    # the stage decodes the votes with the seeded orders: what each pick meant
    records = write_jsonl(tmp_path / "r.jsonl", grouped_records(3, ungrouped=1))
    validate.validate({"validation": {"valid_min_caption": 1}}, "relations", records, tmp_path / "v.jsonl",
                      tmp_path / "m.json", votes=tmp_path / "annotations" / "relations.csv", group_votes=out)
    validated = [json.loads(line) for line in (tmp_path / "v.jsonl").read_text().splitlines()]
    meaning = {r["group"]["id"]: next(k for k, v in r["group"]["votes"].items() if v) for r in validated[:3]}
    assert meaning == {item: what for item, (_, _, what) in sent.items()}
