"""The annotation server: JSON API, durability (kill -9), concurrency, access control, image path safety."""

import http.client
import json
import os
import signal
import sqlite3
import threading
import time
from urllib.parse import urlparse

import httpx
import pytest

from foilforge.pipeline import annotation as annotate
from foilforge.pipeline.stages.annotate_app import db, server
from tests.annotation_helpers import foil_records, running_server, setup_server_db

N_ITEMS = 12


@pytest.fixture
def client(tmp_path):
    from fastapi.testclient import TestClient

    params, database, tokens = setup_server_db(tmp_path, N_ITEMS)
    app = server.create_app(database, tmp_path / "images", annotators_per_item=3)
    with TestClient(app) as test_client:
        yield test_client, database, tokens


def _auth(token):
    return {"Authorization": f"Bearer {token}"}


def _stored(database):
    conn = sqlite3.connect(database)
    try:
        return conn.execute("SELECT n.name, a.item_id, a.choice FROM answers a JOIN annotators n USING (annotator_id) "
                            "ORDER BY 1, 2").fetchall()
    finally:
        conn.close()


def test_no_token_or_a_wrong_token_is_401(client):
    test_client, _, tokens = client
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {tokens['ann1']}"},
                    {"Authorization": "Bearer "}):
        for method, path in (("GET", "/api/next"), ("GET", "/api/progress"), ("POST", "/api/answer")):
            response = test_client.request(method, path, headers=headers,
                                           json={"item_id": "relations:coco:0", "choice": "first"})
            assert response.status_code == 401, (headers, path)
            assert response.headers["www-authenticate"] == "Bearer"
    assert _stored(client[1]) == []


def test_next_answer_conflict_and_bad_answers(client):
    test_client, database, tokens = client
    response = test_client.get("/api/next", headers=_auth(tokens["ann1"]))
    assert response.status_code == 200
    item = response.json()
    assert set(item) == {"item_id", "image_url", "text_1", "text_2", "done", "total"}
    assert (item["done"], item["total"]) == (0, N_ITEMS)
    assert item["image_url"] == "/images/img_000.jpg"
    assert {item["text_1"], item["text_2"]} == {"A dog &lt;0&gt; sits <b>on</b> the mat &amp; rug.",
                                                "A dog &lt;0&gt; sits <b>under</b> the mat &amp; rug."}

    ok = test_client.post("/api/answer", headers=_auth(tokens["ann1"]), json={"item_id": item["item_id"], "choice": "first"})
    assert ok.status_code == 200
    # committed before the 200: a fresh connection (another process could do the same) sees it
    assert _stored(database) == [("ann1", "relations:coco:0", "first")]

    again = test_client.post("/api/answer", headers=_auth(tokens["ann1"]), json={"item_id": item["item_id"], "choice": "both"})
    assert again.status_code == 409 and "already answered" in again.json()["error"]
    bad_choice = test_client.post("/api/answer", headers=_auth(tokens["ann1"]), json={"item_id": "relations:coco:1", "choice": "yes"})
    assert bad_choice.status_code == 400
    assert bad_choice.json()["error"] == "unknown choice 'yes'; expected one of first, second, both, neither, cannot_tell"
    bad_item = test_client.post("/api/answer", headers=_auth(tokens["ann1"]), json={"item_id": "relations:coco:77", "choice": "first"})
    assert bad_item.status_code == 400 and bad_item.json()["error"] == "unknown item 'relations:coco:77'"
    not_json = test_client.post("/api/answer", headers=_auth(tokens["ann1"]), content=b"{nope")
    assert not_json.status_code == 400 and "expected a JSON object" in not_json.json()["error"]
    assert _stored(database) == [("ann1", "relations:coco:0", "first")]
    assert test_client.get("/api/progress", headers=_auth(tokens["ann1"])).json() == {"done": 1, "total": N_ITEMS}


def test_each_item_gets_annotators_per_item_answers_then_204(client):
    test_client, database, tokens = client
    for name in ("ann1", "ann2", "ann3"):
        seen = []
        while (response := test_client.get("/api/next", headers=_auth(tokens[name]))).status_code == 200:
            seen.append(response.json()["item_id"])
            assert test_client.post("/api/answer", headers=_auth(tokens[name]),
                                    json={"item_id": seen[-1], "choice": "neither"}).status_code == 200
        assert response.status_code == 204 and response.content == b""
        assert sorted(seen) == sorted(r["id"] for r in foil_records(N_ITEMS))
    extra = db.add_annotator(database, "ann4")
    assert test_client.get("/api/next", headers=_auth(extra)).status_code == 204   # every item has its 3 answers
    full = test_client.post("/api/answer", headers=_auth(extra), json={"item_id": "relations:coco:0", "choice": "first"})
    assert full.status_code == 409 and "already has 3 answers" in full.json()["error"]
    assert len(_stored(database)) == 3 * N_ITEMS


def test_no_response_says_which_text_is_the_caption(client):
    test_client, _, tokens = client
    captions_first = []
    while (response := test_client.get("/api/next", headers=_auth(tokens["ann2"]))).status_code == 200:
        item = response.json()
        assert set(item) == {"item_id", "image_url", "text_1", "text_2", "done", "total"}
        assert not any(word in json.dumps({k: item[k] for k in ("item_id", "image_url")}) for word in ("caption", "foil"))
        captions_first.append("<b>on</b>" in item["text_1"])
        test_client.post("/api/answer", headers=_auth(tokens["ann2"]), json={"item_id": item["item_id"], "choice": "both"})
    assert len(captions_first) == N_ITEMS and 0 < sum(captions_first) < N_ITEMS   # both orders occur
    page = test_client.get("/").text + test_client.get("/static/app.js").text
    assert "caption_first" not in page
    # the only routes: the page, its two static files, the annotator API and images; no admin route over HTTP
    paths = {route.path for route in test_client.app.routes}
    assert paths == {"/", "/static/{name}", "/api/next", "/api/progress", "/api/answer", "/images/{requested:path}"}


def test_tokens_are_stored_hashed_only(tmp_path):
    database = db.init(tmp_path / "a.sqlite")
    token = db.add_annotator(database, "ann")
    with open(database, "rb") as handle:
        raw = handle.read()
    wal = database.with_name(database.name + "-wal")
    raw += wal.read_bytes() if wal.exists() else b""
    assert token.encode() not in raw and db.token_hash(token).encode() in raw
    with pytest.raises(ValueError, match="already exists"):
        db.add_annotator(database, "ann")


# ---------------------------------------------------------------- a real server process

def _answer_all(base, token, choice, acked, errors, stop=None):
    with httpx.Client(base_url=base, headers=_auth(token), timeout=30) as http:
        while stop is None or not stop.is_set():
            try:
                response = http.get("/api/next")
                if response.status_code == 204:
                    return
                item_id = response.json()["item_id"]
                posted = http.post("/api/answer", json={"item_id": item_id, "choice": choice})
            except httpx.HTTPError:
                return   # the server was killed
            if posted.status_code == 200:
                acked.append(item_id)
            else:
                errors.append((item_id, posted.status_code, posted.text))


def test_three_annotators_concurrently_store_exactly_the_answers_sent(tmp_path):
    n_items = 100
    params, database, tokens = setup_server_db(tmp_path, n_items)
    with running_server(database, params) as (base, _):
        acked = {name: [] for name in tokens}
        errors = []
        threads = [threading.Thread(target=_answer_all, args=(base, tokens[name], choice, acked[name], errors))
                   for name, choice in zip(tokens, ("first", "second", "cannot_tell"))]
        for thread in threads:
            thread.start()
        # meanwhile the same annotator sends one answer twice at once: exactly one is taken
        with httpx.Client(base_url=base, timeout=30) as http:
            racers = []
            extra = db.add_annotator(database, "racer")
            results = []
            def race():
                results.append(http.post("/api/answer", headers=_auth(extra),
                                         json={"item_id": "relations:coco:99", "choice": "both"}).status_code)
            racers = [threading.Thread(target=race) for _ in range(8)]
            for racer in racers:
                racer.start()
            for racer in racers + threads:
                racer.join()
    sent = sum(len(v) for v in acked.values())
    stored = _stored(database)
    racer_rows = [row for row in stored if row[0] == "racer"]
    assert sorted(results).count(200) == len(racer_rows) == 1
    assert all(status == 409 for status in results if status != 200)
    # the racer may have taken one of item 99's three places: then one annotator was refused it with a 409
    assert [e[:2] for e in errors] in ([], [("relations:coco:99", 409)])
    stored_main = sorted(row for row in stored if row[0] != "racer")
    expected = sorted((name, item, choice) for (name, items), choice in zip(acked.items(), ("first", "second", "cannot_tell"))
                      for item in items)
    assert stored_main == expected
    # if the racer took item 99's last place first, one annotator was never offered it (/api/next skips
    # a full item) or was refused it with a 409: one answer fewer, and item 99 holds exactly its 3 places
    missing = 3 * n_items - sent - len(errors)
    assert missing in (0, 1) and not (missing and errors)
    if missing or errors:
        assert sum(1 for row in stored if row[1] == "relations:coco:99") == 3
    assert len(set((name, item) for name, item, _ in stored)) == len(stored)
    print(f"\nconcurrency: 3 annotators, answers sent and acknowledged {sent}, stored {len(stored_main)}; "
          f"duplicate race: 8 sent, {len(racer_rows)} stored")


def test_killing_the_server_loses_no_acknowledged_answer(tmp_path):
    params, database, tokens = setup_server_db(tmp_path, 200)
    with running_server(database, params) as (base, process):
        acked = {name: [] for name in tokens}
        errors, stop = [], threading.Event()
        threads = [threading.Thread(target=_answer_all, args=(base, tokens[name], "first", acked[name], errors, stop))
                   for name in tokens]
        for thread in threads:
            thread.start()
        deadline = time.time() + 60
        while sum(len(v) for v in acked.values()) < 60 and time.time() < deadline:
            time.sleep(0.05)
        os.kill(process.pid, signal.SIGKILL)   # mid-session: requests are in flight
        process.wait(10)
        stop.set()
        for thread in threads:
            thread.join()
    assert sum(len(v) for v in acked.values()) >= 60
    stored = set((name, item) for name, item, _ in _stored(database))
    acknowledged = set((name, item) for name, items in acked.items() for item in items)
    assert acknowledged <= stored                 # nothing answered with 200 is lost
    assert len(stored - acknowledged) <= 3        # at most the one request per annotator in flight at the kill
    print(f"\nkill -9 mid-session: {len(acknowledged)} answers acknowledged, {len(stored)} stored, "
          f"{len(acknowledged - stored)} lost")
    conn = sqlite3.connect(database)
    assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    conn.close()


@pytest.fixture
def image_tree(tmp_path):
    root = tmp_path / "images"
    (root / "sub").mkdir(parents=True)
    (root / "img_000.jpg").write_bytes(b"\xff\xd8\xff\xe0 not really a jpeg")
    (root / "sub" / "b.jpg").write_bytes(b"inner")
    (tmp_path / "secret.txt").write_text("SECRET-OUTSIDE-ROOT")
    (root / "link_out.jpg").symlink_to(tmp_path / "secret.txt")
    (root / "dir_out").symlink_to(tmp_path)
    return root


ATTACKS = ["/images/../params.yaml", "/images/%2e%2e/params.yaml", "/images/%2E%2E%2Fparams.yaml",
           "/images/..%2fsecret.txt", "/images/sub/../../secret.txt", "/images/sub/%2e%2e/%2e%2e/secret.txt",
           "/images//etc/passwd", "/images/%2Fetc%2Fpasswd", "/images/%2fetc/passwd", "/images/link_out.jpg",
           "/images/dir_out/secret.txt", "/images/..%5csecret.txt", "/images/sub", "/images/", "/images/nope.jpg",
           "/images/img_000.jpg%00.txt", "/images/./img_000.jpg"]


def test_images_are_served_from_the_image_root_only(tmp_path, image_tree):
    params, database, _ = setup_server_db(tmp_path, 2)
    with running_server(database, params, image_tree) as (base, _):
        host = urlparse(base)
        def raw_get(path):   # http.client sends the path byte for byte: no client-side normalisation of `..`
            conn = http.client.HTTPConnection(host.hostname, host.port, timeout=10)
            conn.request("GET", path)
            response = conn.getresponse()
            body = response.read()
            conn.close()
            return response.status, body
        assert raw_get("/images/img_000.jpg") == (200, b"\xff\xd8\xff\xe0 not really a jpeg")
        assert raw_get("/images/sub/b.jpg") == (200, b"inner")
        for attack in ATTACKS:
            status, body = raw_get(attack)
            assert status == 404, attack
            assert b"SECRET" not in body and b"seed:" not in body and b"root:" not in body, attack


def test_safe_image_path_rules(image_tree):
    assert server.safe_image_path(image_tree, "img_000.jpg") == (image_tree / "img_000.jpg").resolve()
    for requested in ("../secret.txt", "/etc/passwd", "link_out.jpg", "dir_out/secret.txt", "sub/../img_000.jpg",
                      "sub", "", "a\\..\\b"):
        assert server.safe_image_path(image_tree, requested) is None, requested
    assert server.safe_image_path(None, "img_000.jpg") is None


def test_dump_writes_the_batch_results_format(tmp_path):
    from fastapi.testclient import TestClient

    params, database, tokens = setup_server_db(tmp_path, 3)
    with TestClient(server.create_app(database)) as test_client:
        test_client.post("/api/answer", headers=_auth(tokens["ann2"]), json={"item_id": "relations:coco:1", "choice": "both"})
        test_client.post("/api/answer", headers=_auth(tokens["ann1"]), json={"item_id": "relations:coco:1", "choice": "first"})
    out = tmp_path / "votes" / "relations.csv"
    assert annotate.dump_votes(database, "relations", out) == 2
    lines = out.read_text().splitlines()
    assert lines[0] == "Input.item_id,WorkerId,Answer.choice,SubmitTime"
    assert [line.rsplit(",", 1)[0] for line in lines[1:]] == ["relations:coco:1,ann1,first", "relations:coco:1,ann2,both"]


# ---------------------------------------------------------------- group items (two images, two texts)

@pytest.fixture
def group_client(tmp_path):
    from fastapi.testclient import TestClient

    params, database, tokens = setup_server_db(tmp_path, 6, groups=4)
    with TestClient(server.create_app(database, tmp_path / "images", annotators_per_item=2)) as test_client:
        yield test_client, database, tokens


def test_group_items_need_a_token_and_never_say_which_image_is_whose(group_client):
    from foilforge.pipeline.validation import group_orders

    test_client, database, tokens = group_client
    for headers in ({}, {"Authorization": "Bearer wrong"}):
        assert test_client.get("/api/next", headers=headers).status_code == 401
        assert test_client.post("/api/answer", headers=headers, json={"item_id": "relations:coco:0|group",
                                                                      "text_1": "A", "text_2": "B"}).status_code == 401
    seen = []
    while (response := test_client.get("/api/next", headers=_auth(tokens["ann1"]))).status_code == 200:
        item = response.json()
        assert set(item) == {"item_id", "kind", "image_a_url", "image_b_url", "text_1", "text_2", "done", "total"}
        assert item["kind"] == "group" and item["total"] == 4
        i = int(item["item_id"].split(":")[2].split("|")[0])
        image_0_first, caption_0_first = group_orders(item["item_id"], 0)
        images = [f"/images/img_{i:03d}.jpg", f"/images/partner_{i:03d}.jpg"]
        assert [item["image_a_url"], item["image_b_url"]] == (images if image_0_first else images[::-1])
        assert ("<b>on</b>" in item["text_1"]) == caption_0_first and "<b>under</b>" in item["text_1"] + item["text_2"]
        assert test_client.post("/api/answer", headers=_auth(tokens["ann1"]),
                                json={"item_id": item["item_id"], "text_1": "A", "text_2": "B"}).status_code == 200
        seen.append(item["item_id"])
    assert sorted(seen) == [f"relations:coco:{i}|group" for i in range(4)]      # the 2 ungrouped records: no item


def test_group_answers_one_per_annotator_both_texts_required(group_client):
    test_client, database, tokens = group_client
    gid = "relations:coco:1|group"
    post = lambda name, body: test_client.post("/api/answer", headers=_auth(tokens[name]), json={"item_id": gid, **body})
    for body, problem in (({"text_1": "A"}, "unknown answer for text_2 None"),
                          ({"text_1": "first", "text_2": "B"}, "unknown answer for text_1 'first'"),
                          ({"choice": "first"}, "unknown answer for text_1 None"),
                          ({"text_1": "a", "text_2": "B"}, "unknown answer for text_1 'a'")):
        response = post("ann1", body)
        assert response.status_code == 400
        assert response.json()["error"] == f"{problem}; expected one of A, B, both, neither, cannot_tell"
    assert _stored(database) == []
    assert post("ann1", {"text_1": "B", "text_2": "neither"}).status_code == 200
    again = post("ann1", {"text_1": "A", "text_2": "B"})
    assert again.status_code == 409 and "already answered by you" in again.json()["error"]
    assert post("ann2", {"text_1": "A", "text_2": "A"}).status_code == 200
    full = post("ann3", {"text_1": "A", "text_2": "B"})
    assert full.status_code == 409 and "already has 2 answers" in full.json()["error"]
    conn = sqlite3.connect(database)
    assert conn.execute("SELECT n.name, a.choice, a.choice_2 FROM answers a JOIN annotators n USING (annotator_id) "
                        "ORDER BY 1").fetchall() == [("ann1", "B", "neither"), ("ann2", "A", "A")]
    conn.close()


def test_dump_groups_writes_the_group_votes_format_and_pairs_stay_apart(tmp_path):
    from fastapi.testclient import TestClient

    params, database, tokens = setup_server_db(tmp_path, 3, groups=2)
    pairs = tmp_path / "pairs.jsonl"
    from tests.annotation_helpers import foilforge, write_jsonl

    write_jsonl(pairs, foil_records(1))
    assert foilforge("annotate", "--params", str(params), "load", "relations", "--input", str(pairs),
                     "--db", str(database)).returncode == 0
    with TestClient(server.create_app(database)) as test_client:
        assert test_client.post("/api/answer", headers=_auth(tokens["ann2"]),
                                json={"item_id": "relations:coco:1|group", "text_1": "both", "text_2": "B"}).status_code == 200
        assert test_client.post("/api/answer", headers=_auth(tokens["ann1"]),
                                json={"item_id": "relations:coco:1|group", "text_1": "A", "text_2": "B"}).status_code == 200
        assert test_client.post("/api/answer", headers=_auth(tokens["ann1"]),
                                json={"item_id": "relations:coco:0", "choice": "second"}).status_code == 200
    out = tmp_path / "votes" / "relations.groups.csv"
    done = foilforge("annotate", "dump", "--groups", "--db", str(database), "--output", str(out))
    assert done.returncode == 0, done.stderr
    lines = out.read_text().splitlines()
    assert lines[0] == "Input.item_id,WorkerId,Answer.text_1,Answer.text_2,SubmitTime"
    assert [line.rsplit(",", 1)[0] for line in lines[1:]] == ["relations:coco:1|group,ann1,A,B",
                                                             "relations:coco:1|group,ann2,both,B"]
    assert annotate.dump_votes(database, "relations", tmp_path / "votes" / "relations.csv") == 1
    assert (tmp_path / "votes" / "relations.csv").read_text().splitlines()[1].startswith("relations:coco:0,ann1,second,")
