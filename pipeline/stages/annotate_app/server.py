"""The annotation web app: the page at `/`, a JSON API under `/api/`, images under `/images/`.

Annotators authenticate with `Authorization: Bearer TOKEN` (tokens from `foilforge annotate
add-annotator`; only their hashes are stored). No response carries which text is the caption,
and no route reads or changes anything but the caller's own answers: admin actions (adding
annotators, loading items, dumping votes) are CLI commands, not HTTP routes.

A group item (a Winoground group: two images, two texts) comes with `kind: "group"`, `image_a_url`
and `image_b_url`, and is answered with `{"item_id", "text_1": ..., "text_2": ...}`, each one of
A, B, both, neither, cannot_tell; which image is the record's own is never sent either.
"""


# no `from __future__ import annotations` here: FastAPI reads the `Request` annotations at runtime
import contextlib
import json
import sqlite3
from importlib import resources
from pathlib import Path
from urllib.parse import quote

from foilforge.pipeline.stages.annotate_app import db
from foilforge.pipeline.validation import CHOICES, GROUP_CHOICES  # the answers validate reads back

STATIC_FILES = {"app.js": "text/javascript; charset=utf-8", "style.css": "text/css; charset=utf-8"}


def _static(name: str) -> str:
    return resources.files("foilforge.pipeline.stages.annotate_app").joinpath("static", name).read_text(encoding="utf-8")


def safe_image_path(image_root: Path | None, requested: str) -> Path | None:
    """The file under `image_root` that `requested` names, or None: no `..`, no absolute paths, no symlink out."""
    if image_root is None or not requested or "\x00" in requested or "\\" in requested:
        return None
    parts = requested.split("/")
    if requested.startswith("/") or any(p in ("", ".", "..") for p in parts):
        return None
    root = image_root.resolve()
    try:
        target = (root / requested).resolve(strict=True)
    except (OSError, RuntimeError):
        return None
    if not target.is_relative_to(root) or not target.is_file():
        return None
    return target


def create_app(db_path, image_root=None, annotators_per_item: int = 3):
    from fastapi import FastAPI, Request
    from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, Response

    db_path = db.init(db_path)
    image_root = Path(image_root) if image_root else None
    app = FastAPI(title="foilforge annotation", docs_url=None, redoc_url=None, openapi_url=None)

    def error(status: int, message: str) -> JSONResponse:
        headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
        return JSONResponse({"error": message}, status_code=status, headers=headers)

    def unauthorized() -> JSONResponse:
        return error(401, "missing or unknown token: send Authorization: Bearer TOKEN")

    def annotator(request: Request, conn: sqlite3.Connection):
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        row = conn.execute("SELECT annotator_id FROM annotators WHERE token_sha256 = ?",
                           (db.token_hash(token.strip()),)).fetchone()
        return row[0] if row else None

    def progress(conn, annotator_id: int) -> dict:
        done = conn.execute("SELECT COUNT(*) FROM answers WHERE annotator_id = ?", (annotator_id,)).fetchone()[0]
        open_items = conn.execute(
            "SELECT COUNT(*) FROM items i WHERE NOT EXISTS (SELECT 1 FROM answers a WHERE a.item_id = i.item_id "
            "AND a.annotator_id = ?) AND (SELECT COUNT(*) FROM answers a WHERE a.item_id = i.item_id) < ?",
            (annotator_id, annotators_per_item)).fetchone()[0]
        return {"done": done, "total": done + open_items}

    @app.get("/", response_class=HTMLResponse)
    def page():
        return HTMLResponse(_static("index.html"), headers={"Cache-Control": "no-store"})

    @app.get("/static/{name}")
    def static(name: str):
        if name not in STATIC_FILES:
            return error(404, "not found")
        return Response(_static(name), media_type=STATIC_FILES[name])

    @app.get("/api/next")
    def next_item(request: Request):
        with contextlib.closing(db.connect(db_path)) as conn:
            who = annotator(request, conn)
            if who is None:
                return unauthorized()
            # items nearest to complete first, so finished items accumulate; then load order
            row = conn.execute(
                "SELECT i.item_id, i.kind, i.image_file, i.image_file_b, i.text_1, i.text_2, "
                "(SELECT COUNT(*) FROM answers a WHERE a.item_id = i.item_id) AS n FROM items i "
                "WHERE NOT EXISTS (SELECT 1 FROM answers a WHERE a.item_id = i.item_id AND a.annotator_id = ?) "
                "AND n < ? ORDER BY n DESC, i.position LIMIT 1", (who, annotators_per_item)).fetchone()
            if row is None:
                return Response(status_code=204)
            item_id, kind, image_file, image_file_b, text_1, text_2, _ = row
            if kind == "group":
                return {"item_id": item_id, "kind": "group", "image_a_url": "/images/" + quote(image_file),
                        "image_b_url": "/images/" + quote(image_file_b), "text_1": text_1, "text_2": text_2,
                        **progress(conn, who)}
            return {"item_id": item_id, "image_url": "/images/" + quote(image_file), "text_1": text_1,
                    "text_2": text_2, **progress(conn, who)}

    @app.get("/api/progress")
    def get_progress(request: Request):
        with contextlib.closing(db.connect(db_path)) as conn:
            who = annotator(request, conn)
            if who is None:
                return unauthorized()
            return progress(conn, who)

    @app.post("/api/answer")
    async def answer(request: Request):
        try:
            body = json.loads(await request.body() or b"null")
        except (json.JSONDecodeError, UnicodeDecodeError):
            body = None
        from starlette.concurrency import run_in_threadpool

        # the SQLite write (and its fsync) runs on a worker thread, not on the event loop
        return await run_in_threadpool(_answer, request, body)

    def _answer(request, body):
        with db.transaction(db_path) as conn:
            who = annotator(request, conn)
            if who is None:
                return unauthorized()
            if not isinstance(body, dict) or not isinstance(body.get("item_id"), str):
                return error(400, 'expected a JSON object {"item_id": "...", "choice": "..."} '
                                  '(a group item: {"item_id": "...", "text_1": "A", "text_2": "B"})')
            item_id = body["item_id"]
            kind = conn.execute("SELECT kind FROM items WHERE item_id = ?", (item_id,)).fetchone()
            if kind is not None and kind[0] == "group":
                answers = (body.get("text_1"), body.get("text_2"))
                for name, given in zip(("text_1", "text_2"), answers):
                    if given not in GROUP_CHOICES:
                        return error(400, f"unknown answer for {name} {given!r}; expected one of {', '.join(GROUP_CHOICES)}")
            else:
                answers = (body.get("choice"), None)
                if answers[0] not in CHOICES:
                    return error(400, f"unknown choice {answers[0]!r}; expected one of {', '.join(CHOICES)}")
            if kind is None:
                return error(400, f"unknown item {item_id!r}")
            if conn.execute("SELECT 1 FROM answers WHERE item_id = ? AND annotator_id = ?", (item_id, who)).fetchone():
                return error(409, f"item {item_id!r} already answered by you")
            if conn.execute("SELECT COUNT(*) FROM answers WHERE item_id = ?", (item_id,)).fetchone()[0] >= annotators_per_item:
                return error(409, f"item {item_id!r} already has {annotators_per_item} answers")
            conn.execute("INSERT INTO answers(annotator_id, item_id, choice, choice_2) VALUES (?, ?, ?, ?)",
                         (who, item_id, *answers))
        # the transaction has committed (synchronous=FULL) before this response is built
        return {"ok": True, "item_id": item_id}

    @app.get("/images/{requested:path}")
    def image(requested: str):
        target = safe_image_path(image_root, requested)
        if target is None:
            return error(404, "no such image")
        return FileResponse(target)

    return app


def serve(db_path, image_root, host: str, port: int, annotators_per_item: int) -> None:
    import uvicorn

    app = create_app(db_path, image_root, annotators_per_item)
    # one process: SQLite serialises writers anyway; requests run on uvicorn's worker threads
    uvicorn.run(app, host=host, port=port, log_level="info", proxy_headers=False, server_header=False)
