"""Shared pieces of the human-validation tests: foil records, a params file, a real server process."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def foil_records(n: int, instrument: str = "relations") -> list[dict]:
    """n records as the select stage writes them; the changed word is a preposition, its spans recorded."""
    records = []
    for i in range(n):
        caption = f"A dog <{i}> sits on the mat & rug."
        foil = f"A dog <{i}> sits under the mat & rug."
        start = caption.index("on")
        records.append({
            "id": f"{instrument}:coco:{i}", "sample_id": f"coco:{i}", "instrument": instrument,
            "linguistic_phenomena": "relations", "caption": caption, "foil": foil, "classes": "on",
            "classes_foil": "under", "dataset": "coco", "original_split": "val", "dataset_idx": i,
            "image_file": f"img_{i:03d}.jpg", "mturk": None,
            "provenance": {"foiler": "relations.v1", "caption_span": [start, start + 2], "foil_span": [start, start + 5]},
            "filters": {"length": {"model": "tok", "variant": "length.v1", "score": 9, "passed": True}},
        })
    return records


def grouped_records(n: int, instrument: str = "relations", ungrouped: int = 0) -> list[dict]:
    """foil_records(n + ungrouped), the first n with a `group` as the select stage stores it: the partner image
    partner_<i>.jpg, which the foil describes."""
    records = foil_records(n + ungrouped, instrument)
    for i, record in enumerate(records[:n]):
        record["group"] = {"id": f"{record['id']}|group", "image_1": f"partner_{i:03d}.jpg",
                           "partner_sample_id": f"coco:{1000 + i}", "partner_dataset_idx": str(1000 + i),
                           "rule": "coco: the partner's captions state the foil's span", "annotations": [str(i), str(1000 + i)]}
    return records


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def write_params(path: Path, **validation) -> Path:
    params = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    params["validation"] = {**params.get("validation", {}), **validation}
    path.write_text(yaml.safe_dump(params), encoding="utf-8")
    return path


def foilforge(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "foilforge.pipeline.stages.cli", *args], cwd=cwd or ROOT,
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def running_server(db: Path, params: Path, image_root: Path | None = None):
    """`foilforge annotate serve` in its own process; yields (base url, process). Killed at the end if still alive."""
    port = free_port()
    cmd = [sys.executable, "-m", "foilforge.pipeline.stages.cli", "annotate", "--params", str(params), "serve",
           "--db", str(db), "--port", str(port)]
    if image_root is not None:
        cmd += ["--image-root", str(image_root)]
    log = open(db.parent / f"server-{port}.log", "w")
    process = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                               env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        deadline = time.time() + 60
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"server exited: {(db.parent / f'server-{port}.log').read_text()}")
            with contextlib.suppress(OSError):
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            if time.time() > deadline:
                raise RuntimeError("server did not start within 60 s")
            time.sleep(0.2)
        yield f"http://127.0.0.1:{port}", process
    finally:
        if process.poll() is None:
            process.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(10)
            if process.poll() is None:
                process.kill()
        log.close()


def setup_server_db(tmp: Path, n_items: int, annotators=("ann1", "ann2", "ann3"), groups: int = 0,
                    **validation) -> tuple[Path, Path, dict]:
    """A params file, the records loaded into a fresh database, and a token per annotator. With `groups`: only
    the groups of the first `groups` records are loaded (`annotate load --groups`), none of the pairs."""
    params = write_params(tmp / "params.yaml", **validation)
    records = write_jsonl(tmp / "filtered" / "relations.jsonl",
                          grouped_records(groups, ungrouped=n_items - groups) if groups else foil_records(n_items))
    db = tmp / "annotations" / "annotations.sqlite"
    done = foilforge("annotate", "--params", str(params), "load", "relations", "--input", str(records), "--db", str(db),
                     *(["--groups"] if groups else []))
    assert done.returncode == 0, done.stderr
    tokens = {}
    for name in annotators:
        done = foilforge("annotate", "add-annotator", name, "--db", str(db))
        assert done.returncode == 0, done.stderr
        tokens[name] = done.stdout.strip()
    return params, db, tokens
