"""Attackers neither the adversarial filter nor the release gate uses, on what the filter keeps.

The gate certifies with attackers kept apart from the filter, but the project chose both sets. This check asks
how well the filtered sets hold against learners of other kinds, which appear nowhere in params.yaml:

* `tfidf_svm`: a linear SVM on the difference of TF-IDF word 1-3-gram vectors (sublinear tf), both orders;
* `per_text_char`: logistic regression on one text at a time (character 3-5-grams within word boundaries),
  trained to tell captions from foils; the pair goes to the text it scores higher;
* `forest`: a random forest on the difference of bag-of-words vectors (the 300 most frequent words of the
  training texts) plus lengths and the plausibility scorers' numbers; margin f(d) - f(-d).

Every one is fitted out of fold with folds grouped by caption (foilforge/attacker.py `grouped_folds`), over three
partitions. Each released file is scored by the filters of its instrument (cached under `--keep`, the cache the
benchmarks over the released pieces share: benchmarks/common.py), filtered by params.yaml's adversarial filter, and
attacked before (every released record) and after (the kept ones). Written to benchmarks/results/unseen_attackers.json.

    python -m benchmarks.bench_unseen_attackers [--only existence.json] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from benchmarks.common import scored_pieces, start_pieces, write_result

NAME = "unseen_attackers"
PARTITIONS = 3


def _tfidf_svm(train, test):
    import numpy as np
    from scipy import sparse
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.svm import LinearSVC

    vectorizer = TfidfVectorizer(ngram_range=(1, 3), sublinear_tf=True).fit(
        [p.caption for p in train] + [p.foil for p in train])
    d = vectorizer.transform([p.caption for p in train]) - vectorizer.transform([p.foil for p in train])
    model = LinearSVC(C=1.0, fit_intercept=False, dual=True, max_iter=5000, random_state=0).fit(
        sparse.vstack([d, -d]), np.r_[np.ones(len(train)), np.zeros(len(train))])
    t = vectorizer.transform([p.caption for p in test]) - vectorizer.transform([p.foil for p in test])
    return np.asarray(t @ model.coef_[0]).ravel()


def _per_text_char(train, test):
    import numpy as np
    from sklearn.feature_extraction.text import CountVectorizer
    from sklearn.linear_model import LogisticRegression

    texts = [p.caption for p in train] + [p.foil for p in train]
    vectorizer = CountVectorizer(analyzer="char_wb", ngram_range=(3, 5), binary=True).fit(texts)
    model = LogisticRegression(C=1.0, max_iter=2000, solver="liblinear").fit(
        vectorizer.transform(texts), np.r_[np.ones(len(train)), np.zeros(len(train))])
    return (model.decision_function(vectorizer.transform([p.caption for p in test]))
            - model.decision_function(vectorizer.transform([p.foil for p in test])))


def _forest(train, test):
    import numpy as np
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.feature_extraction.text import CountVectorizer

    vectorizer = CountVectorizer(max_features=300).fit([p.caption for p in train] + [p.foil for p in train])

    def rows(pairs):
        bag = (vectorizer.transform([p.caption for p in pairs]) - vectorizer.transform([p.foil for p in pairs])).toarray()
        dense = np.array([np.subtract(p.caption_features + (len(p.caption.split()),),
                                      p.foil_features + (len(p.foil.split()),)) for p in pairs], dtype=float)
        return np.hstack([bag, dense])

    d = rows(train)
    model = RandomForestClassifier(n_estimators=200, min_samples_leaf=2, random_state=0, n_jobs=1).fit(
        np.vstack([d, -d]), np.r_[np.ones(len(train)), np.zeros(len(train))])
    t = rows(test)
    return model.predict_proba(t)[:, 1] - model.predict_proba(-t)[:, 1]


UNSEEN = {"tfidf_svm": _tfidf_svm, "per_text_char": _per_text_char, "forest": _forest}


def attack(records: list[dict]) -> dict:
    """Per unseen attacker: accuracy (ties half) out of fold, averaged over PARTITIONS grouped partitions."""
    import numpy as np

    from foilforge.filters.attackers import correctness, grouped_folds, pairs_from_records

    pairs = pairs_from_records(records)
    out = {}
    for name, fit_score in UNSEEN.items():
        shares = []
        for seed in range(PARTITIONS):
            fold = grouped_folds([p.group for p in pairs], 5, 7000 + seed)
            margins = np.zeros(len(pairs))
            for k in sorted(set(fold)):
                train = [p for p, f in zip(pairs, fold) if f != k]
                held = [i for i, f in enumerate(fold) if f == k]
                if train:
                    margins[held] = fit_score(train, [pairs[i] for i in held])
            shares.append(correctness(margins))
        out[name] = round(float(np.mean(shares)), 4) if pairs else None
    return out


def main(argv=None) -> int:
    from foilforge.pipeline.refiltering import filter_scored

    setup = start_pieces(argparse.ArgumentParser(description=__doc__.splitlines()[0]), argv, NAME)
    if setup is None:
        return 0
    args, params, results = setup
    results["attackers"] = __doc__.split("\n\n")[1]
    for relative, like, path, scored, _ in scored_pieces(params, args.only, args.keep):
        started = time.perf_counter()
        kept, report = filter_scored(params, like, scored, path, progress=False)
        entry = {"like": like, "records": len(scored), "kept": len(kept),
                 "gate_passed": (report["gate"] or {}).get("passed"),
                 "before": attack(scored), "after": attack(kept)}
        entry["seconds"] = round(time.perf_counter() - started, 1)
        print(relative, json.dumps(entry), flush=True)
        results[relative] = entry
        write_result(NAME, results, args, argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
