"""bd2bb_decoys.v1: action codes, clusters, language/vision decoy rules, BD2BB CSV export."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from foilforge.encoders import build_sentence_encoder
from foilforge.errors import ConfigError, InputError
from foilforge.foiler import FOILERS
from foilforge.foilers.bd2bb_decoys import BD2BBDecoys
from foilforge.foilers.lang.action_clusters import elbow_k, write_elbow_report
from foilforge.foilers.lang.action_codes import ActionCodes, action_codes
from foilforge.foilers.lang.bd2bb_csv import CSV_HEADER, released_overlap, write_bd2bb_csv
from foilforge.nlp import OFFLINE_SPACY, load_spacy
from foilforge.testing import TableEncoder  # hand-set vectors: cosines and decoys computable by hand
from tests.conftest import shared_path

SAMPLE_CSV = Path(__file__).resolve().parents[1] / "data" / "sample" / "bd2bb" / "test.csv"


def bd2bb_samples(path: Path, split: str = "test") -> list[dict]:
    """The ingest output shape for BD2BB, read from a CSV in the released layout."""
    samples = []
    with open(path, encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle):
            endings = [row[f"ending{i}"] for i in range(5)]
            label = int(row["label"])
            samples.append({"id": f"bd2bb:{path.stem}:{row['id']}", "source": "bd2bb", "dataset": "BD2BB",
                            "original_split": split, "dataset_idx": row["id"], "image_file": "",
                            "intention": row["sent1"], "sent2": row["sent2"], "endings": endings,
                            "types": [row[f"end{i}type"] for i in range(5)], "label": label, "target": endings[label]})
    return samples


TENNIS = {  # cosine to the first action: 1, .98, .86, .55, .74
    "swing the racket to hit the ball": [1, 0, 0, 0], "serve the ball over the net": [1, 0, 0.2, 0],
    "buy new shoes for the match": [1, 0, 0.6, 0], "hit the ball hard": [1, 0, 1.5, 0],
    "cheer for the player": [1, 0, 0.9, 0],
}
KITCHEN = {  # cosine to "swing the racket...": .09, .29, .45, .20, 0
    "cook pasta for dinner": [0.1, 1, 0, 0.5], "chop the onions": [0.3, 1, 0, 0],
    "wash the racket in the sink": [0.5, 1, 0, 0], "buy bread at the shop": [0.2, 1, 0, 0],
    "boil water for tea": [0, 1, 0, 0],
}


def toy_samples(actions) -> list[dict]:
    return [{"id": f"bd2bb:toy:{i}", "dataset_idx": str(i), "original_split": "test", "dataset": "BD2BB", "image_file": "",
             "intention": "feel energetic", "sent2": "", "target": action} for i, action in enumerate(actions)]


@pytest.fixture(scope="module")
def nlp():
    return load_spacy(OFFLINE_SPACY)


def test_registered_and_rejects_unknown_args():
    assert FOILERS.get("bd2bb_decoys.v1") is BD2BBDecoys
    with pytest.raises(ConfigError, match="unknown argument"):
        FOILERS.build("bd2bb_decoys.v1", {"n_cluster": 60})


def test_action_codes_of_the_papers_example(nlp):
    [codes] = action_codes(["I will swing the racket to hit the ball"], nlp)
    assert codes == ActionCodes(code1="swing", code2=("racket",), code3="hit", code4=("ball",))
    # a bare verb phrase is coded as "I will <action>"; "riding" lemmatises to ride
    [bare] = action_codes(["walk around the men and the elephant they are riding"], nlp)
    assert bare.code1 == "walk" and bare.code3 == "ride" and bare.nouns == {"man", "elephant"}


def test_exact_decoys_on_hand_set_vectors():
    table = {**TENNIS, **KITCHEN}
    foiler = BD2BBDecoys(spacy_model=OFFLINE_SPACY, n_clusters=2).use_encoder(TableEncoder(table))
    records = foiler.run(toy_samples(table), seed=0, instrument="bd2bb")
    record = next(r for r in records if r["caption"] == "swing the racket to hit the ball")
    by_type = {kind: [e for e, t in zip(record["endings"], record["end_types"]) if t == kind] for kind in ("targ", "lan", "vis")}
    # language: other cluster, no shared noun ("wash the racket" is the most similar but shares racket), 2 most similar
    assert sorted(by_type["lan"]) == ["buy bread at the shop", "chop the onions"]
    assert record["foil"] == "chop the onions"
    # vision: same cluster, no shared verb ("hit the ball hard" is least similar but shares hit), 2 least similar
    assert sorted(by_type["vis"]) == ["buy new shoes for the match", "cheer for the player"]
    assert record["endings"][record["label"]] == record["caption"] and by_type["targ"] == [record["caption"]]
    assert record["candidates"] == record["endings"]  # the multiple-choice shape evaluate scores
    assert record["decoy_similarity"]["lan"] == pytest.approx([0.287348, 0.196116], abs=1e-5)
    assert record["clustering"]["k"] == 2 and record["clustering"]["chosen_by"] == "n_clusters"


def test_sample_without_enough_decoys_gives_nothing():
    table = {"swing the racket to hit the ball": [1, 0], "hit the ball hard": [1, 0.1], "chop the onions": [0, 1]}
    foiler = BD2BBDecoys(spacy_model=OFFLINE_SPACY, n_clusters=2).use_encoder(TableEncoder(table))
    assert foiler.run(toy_samples(table), seed=0) == []


def test_elbow_picks_the_knee():
    # inertia drops fast until k=3, then slowly
    assert elbow_k([1, 2, 3, 4, 5, 6], [100, 50, 20, 17, 15, 14]) == 3
    assert elbow_k([10, 20], [5.0, 4.0]) == 20


def test_elbow_report_json_and_png(tmp_path):
    clustering = {"k": 3, "ks": [1, 2, 3, 4], "inertias": [10.0, 6.0, 2.0, 1.5], "chosen_by": "elbow"}
    write_elbow_report(clustering, tmp_path / "elbow.json", tmp_path / "elbow.png")
    assert json.loads((tmp_path / "elbow.json").read_text()) == clustering
    assert (tmp_path / "elbow.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_csv_export_has_the_released_layout(tmp_path):
    table = {**TENNIS, **KITCHEN}
    records = BD2BBDecoys(spacy_model=OFFLINE_SPACY, n_clusters=2).use_encoder(TableEncoder(table)).run(toy_samples(table))
    path = tmp_path / "out.csv"
    assert write_bd2bb_csv(records, path) == len(records)
    with open(path, encoding="utf-8", newline="") as handle:
        rows = list(csv.reader(handle))
    assert rows[0] == CSV_HEADER
    first = records[0]
    assert rows[1] == [first["dataset_idx"], "feel energetic", "", *first["endings"], *first["end_types"], str(first["label"])]


def test_sample_csv_has_150_rows_in_the_bd2bb_layout():
    ours = bd2bb_samples(SAMPLE_CSV)
    assert len(ours) == 150
    assert next(csv.reader(open(SAMPLE_CSV, encoding="utf-8"))) == CSV_HEADER
    assert all(sorted(s["types"]) == ["lan", "lan", "targ", "vis", "vis"] for s in ours)


def test_csv_header_is_the_released_one():
    released = shared_path("data", "real", "bd2bb", "test.csv")
    assert next(csv.reader(open(released, encoding="utf-8"))) == CSV_HEADER


def test_missing_target_names_record_and_field():
    with pytest.raises(InputError) as err:
        BD2BBDecoys().check_sample({"id": "bd2bb:test:7", "intention": "am hungry"}, "bd2bb.jsonl", "bd2bb:test:7")
    assert str(err.value) == ("bd2bb.jsonl, record bd2bb:test:7, field 'target': "
                              "needs the target action (a non-empty string, or endings + label)")


def test_unknown_encoder_kind_and_missing_package_are_config_errors():
    with pytest.raises(ConfigError, match=r"instruments.b.args.encoder.kind must be one of sentence_transformers, tf_hub"):
        build_sentence_encoder({"kind": "use", "name_or_path": "x"}, "instruments.b.args.encoder")
    with pytest.raises(ConfigError, match=r"models.sentence_encoder.name_or_path .*not installed"):
        build_sentence_encoder({"name_or_path": "package:no_such_encoder_pkg"}, "models.sentence_encoder")


def test_decoy_rules_on_every_real_test_sample(tiny_models):
    """Real BD2BB test actions as the pool, a tiny random encoder loaded like a user's model: rules hold everywhere."""
    samples = bd2bb_samples(shared_path("data", "real", "bd2bb", "test.csv"))
    encoder = {"name_or_path": str(tiny_models.bert_encoder_only()), "device": "cpu", "batch_size": 256}
    from foilforge.foiler import RunContext

    foiler = BD2BBDecoys(encoder=encoder, spacy_model=OFFLINE_SPACY, elbow_k_min=10, elbow_k_max=60, elbow_k_step=10)
    context = RunContext("bd2bb_decoys", seed=0)
    pools = []   # the pool the run built, kept as it passes
    corpus_pass = foiler.corpus_pass
    foiler.corpus_pass = lambda samples, context: pools.append(corpus_pass(samples, context)) or pools[-1]
    records = foiler.run(samples, context=context)
    assert len(records) >= 0.95 * len(samples)
    [pool] = pools
    assert context.stats["clustering"] == pool.clustering
    assert pool.clustering["chosen_by"] == "elbow" and pool.clustering["k"] in range(10, 61, 10)
    for record in records:
        target = pool.index[record["caption"]]
        t_codes, t_cluster = pool.codes[target], pool.clusters[target]
        assert sorted(record["end_types"]) == ["lan", "lan", "targ", "vis", "vis"]
        assert record["endings"][record["label"]] == record["caption"]
        assert len({e.lower() for e in record["endings"]}) == 5
        for ending, kind in zip(record["endings"], record["end_types"]):
            i = pool.index[ending]
            if kind == "lan":
                assert pool.clusters[i] != t_cluster and not (pool.codes[i].nouns & t_codes.nouns), record["id"]
            elif kind == "vis":
                assert pool.clusters[i] == t_cluster and not (pool.codes[i].verbs & t_codes.verbs), record["id"]
        # ranking: the language decoys are the two most similar of their kind, vision the two least
        lan = record["decoy_similarity"]["lan"]
        vis = record["decoy_similarity"]["vis"]
        assert lan == sorted(lan, reverse=True) and vis == sorted(vis)
    by_id = {s["id"]: s for s in samples}
    overlap = [released_overlap(r, by_id[r["sample_id"]]) for r in records]
    assert all(0 <= o["lan_same_type"] + o["vis_same_type"] <= o["any"] <= o["n"] == 4 for o in overlap)


def test_released_overlap_counts_by_type():
    sample = {"endings": ["A", "b", "c", "d", "e"], "types": ["targ", "lan", "lan", "vis", "vis"]}
    record = {"endings": ["a", "B", "d", "x", "y"], "end_types": ["targ", "lan", "lan", "vis", "vis"]}
    # "b" is a released language decoy (same type); "d" a released vision decoy chosen as language decoy
    assert released_overlap(record, sample) == {"lan_same_type": 1, "vis_same_type": 0, "any": 2, "n": 4}
