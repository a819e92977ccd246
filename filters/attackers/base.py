"""The shared bases of the pair attackers: logistic regression on the difference of the two texts' features.

`LinearPairAttacker` fits a logistic regression without intercept on rows phi(first) - phi(second), trained on
both orders, so it is antisymmetric; a family supplies the feature map phi (`fit_features`, `vectorize`,
`feature_names_out`). `NgramPairAttacker` is the map of binary n-gram counts (word_ngram, char_ngram).
`ModelBackedAttacker` is what the attackers over a configured model (hidden_probe, transformer_pair) share.
"""

from __future__ import annotations

import functools

from foilforge.attacker import Attacker, Pair, captions_first
from foilforge.errors import ConfigError


def check_positive(name: str, value) -> None:
    """A ConfigError unless `value` is a number > 0 (booleans are not numbers here)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ConfigError(f"argument {name} must be a number > 0, got {value!r}")


#: the word n-gram attackers' tokens: one-letter words and punctuation-free numerals ("a", "0") too, and "n't":
#: they carry the shortcuts
WORD_TOKENS = r"(?u)\b\w+\b|n't"

#: liblinear's iteration cap of the primal solver
MAX_ITER = 2000
#: passes of the dual solver before a fit goes to the primal one. A fit the dual solver ends in fewer is fast (most
#: n-gram fits end in 10-100 passes); one that needs more (a large C on rows it can hardly separate: the gate's C=10
#: on multiple-choice pairs) reaches the optimum sooner with the primal solver: past 100 passes the dual solver took
#: 2.6x the time of a refit on the sample's bd2bb_decoys fits (docs/performance.md)
DUAL_MAX_ITER = 100


@functools.lru_cache(maxsize=1)
def thread_pools():
    """threadpoolctl's controller of this process's thread pools, found once (`threadpool_limits` looks for them
    through every loaded library on each call). scikit-learn's estimators and scipy's linear algebra are imported
    first, so the OpenMP runtime of its trees and the BLAS liblinear calls (scipy's; numpy's is loaded by then too)
    are among them (a runtime loaded later, torch's say, is not, and no fit here runs on it)."""
    import scipy.linalg  # noqa: F401  (loads scipy's BLAS, which liblinear calls)
    import sklearn.ensemble  # noqa: F401  (loads scikit-learn's OpenMP runtime)
    import sklearn.svm  # noqa: F401
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def fit_logistic(x, y, C: float, random_state: int, dual: bool, max_iter: int = DUAL_MAX_ITER):
    """L2-regularised logistic regression without intercept (liblinear), fitted to its optimum.

    The dual coordinate-descent solver is fast on sparse n-gram rows when it ends in a few passes; a fit that
    reaches `max_iter` passes (DUAL_MAX_ITER; a primal fit MAX_ITER) without ending is done again with the primal trust-region Newton
    solver at a tight tolerance, which reaches the optimum in a few steps; a fit the first solver finished is
    kept as it is. Either way the result is the optimum to the solvers' tolerance, whatever the cap.

    On one BLAS thread: liblinear's solvers make thousands of vector operations a fit, each too small to gain from
    threads, and with every core busy (the pipeline's workers side by side) threads that wait for each other
    made a primal fit 88-163 times slower (docs/performance.md, bench_blas_threads). One thread also makes a fit's
    last bits the same on any machine, whatever its cores.
    """
    with thread_pools().limit(limits=1, user_api="blas"):
        cap = max_iter if dual else MAX_ITER
        model = liblinear_fit(x, y, C, random_state, dual, cap)
        if model.n_iter_.max() >= cap:
            model = liblinear_fit(x, y, C, random_state, False, MAX_ITER, tol=1e-8)
    return model


def liblinear_fit(x, y, C: float, random_state: int, dual: bool, max_iter: int, tol: float = 1e-4) -> "LogisticFit":
    """One liblinear fit of L2-regularised logistic regression without intercept, as `fit_logistic` runs it (once,
    or twice: the primal refit at tol 1e-8), on the process's threads; not converging is not reported (the caller
    reads `n_iter_`).

    The fit scikit-learn's LogisticRegression(solver="liblinear", fit_intercept=False) makes, bit for bit (tests/
    test_attackers.py): the same call of scikit-learn's liblinear wrapper with the same arguments (labels as
    indices into the sorted classes, class and sample weights 1, the seed a RandomState of `random_state` draws),
    without the checks of arguments and data around it: the gate and the adversarial filter make tens of
    thousands of fits of a few hundred rows, where those checks took as long as the solver (docs/performance.md).
    The rows are given as LogisticRegression passes them on: CSR or C-ordered, float64. A scikit-learn whose
    binding takes other arguments gets the fit through LogisticRegression: the same numbers, slower."""
    import numpy as np
    from scipy import sparse
    from sklearn.svm import _liblinear

    x = x.tocsr().astype(np.float64, copy=False) if sparse.issparse(x) else np.ascontiguousarray(x, dtype=np.float64)
    classes, labels = np.unique(np.asarray(y), return_inverse=True)
    if len(classes) != 2:
        raise ValueError(f"a logistic fit needs rows of exactly two classes, got {len(classes)}")
    if not _BINDING_WORKS:
        return _wrapped_fit(x, y, C, random_state, dual, max_iter, tol)
    seed = np.random.RandomState(random_state).randint(np.iinfo("i").max)
    solver = LIBLINEAR_L2_LOGISTIC_DUAL if dual else LIBLINEAR_L2_LOGISTIC_PRIMAL
    try:
        _liblinear.set_verbosity_wrap(0)
        coef, n_iter = liblinear_binding()(x, np.require(labels.astype(np.float64).ravel(), requirements="W"),
                                           sparse.issparse(x), solver, tol, -1.0, C, np.ones(2), max_iter, seed,
                                           0.1, np.ones(x.shape[0]))
    except TypeError as err:  # a scikit-learn whose private binding takes other arguments: its public estimator
        import logging

        _BINDING_WORKS.clear()
        logging.getLogger(__name__).warning("scikit-learn's liblinear binding takes other arguments (%s): fitting "
                                            "with LogisticRegression instead (the same numbers, slower)", err)
        return _wrapped_fit(x, y, C, random_state, dual, max_iter, tol)
    return LogisticFit(coef, n_iter)


#: non-empty while the direct call of scikit-learn's liblinear binding works in this process
_BINDING_WORKS = [True]


def liblinear_binding():
    """scikit-learn's liblinear training function (private: `train_wrap`), which LogisticRegression calls too."""
    from sklearn.svm import _liblinear

    return _liblinear.train_wrap


def _wrapped_fit(x, y, C: float, random_state: int, dual: bool, max_iter: int, tol: float) -> "LogisticFit":
    """The same fit through LogisticRegression (its checks included): where the binding's arguments differ."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = LogisticRegression(C=C, fit_intercept=False, solver="liblinear", max_iter=max_iter, dual=dual,
                                   tol=tol, random_state=random_state).fit(x, y)
    return LogisticFit(model.coef_, model.n_iter_)


def side_by_side(first, second):
    """Paired rows of a shared feature map whose attacker reads each text of a pair apart (naive Bayes, the edit in
    each direction): the first text's sparse row beside the second's, one CSR row a pair; `sides` splits them."""
    from scipy import sparse

    return sparse.hstack([first, second], format="csr")


def sides(rows):
    """(first texts' rows, second texts' rows) of rows built by `side_by_side`."""
    width = rows.shape[1] // 2
    return rows[:, :width], rows[:, width:]


#: Newton's method stops when the gradient's norm is this share of its first one (or of 1, when smaller)
NEWTON_TOLERANCE = 1e-12
#: and after this many steps at most (a fit takes 5-15)
NEWTON_MAX_STEPS = 100


def fit_dense_logistic(difference, C: float) -> "LogisticFit":
    """L2-regularised logistic regression without intercept on dense rows d, trained on d (label 1) and -d (label
    0) as `fit_logistic` trains it, by Newton's method with a backtracking line search, to the optimum.

    The objective 0.5 |w|^2 + 2C sum_i log(1 + exp(-d_i . w)) (each pair's two rows lose the same) is strictly
    convex, so the optimum is one point whichever solver finds it; liblinear's primal solver stops at a loose
    tolerance (1e-4 of the first gradient) and walks the dense rows as sparse ones, at up to 4 times the time on
    the probes' hidden states (docs/performance.md, "Dense logistic fits"). With fewer rows than features the optimum
    lies in the rows' span (any other part of w adds to |w| and nothing to the fit), so the steps are taken there:
    D^T = QR, w = Q b, D w = R^T b, |w| = |b|. On one BLAS thread, like the liblinear fits: the same bits on any
    number of cores."""
    import numpy as np
    from scipy.linalg import cho_factor, cho_solve
    from scipy.special import expit, log_expit

    rows, features = difference.shape
    with thread_pools().limit(limits=1, user_api="blas"):
        basis, x = None, difference
        if 0 < rows < features:
            basis, upper = np.linalg.qr(difference.T)
            x = upper.T
        weight = 2.0 * C

        def objective(w):
            return 0.5 * float(w @ w) - weight * float(log_expit(x @ w).sum())

        w = np.zeros(x.shape[1])
        value, first, steps = objective(w), None, 0
        for steps in range(1, NEWTON_MAX_STEPS + 1):
            wrong = expit(-(x @ w))  # each row's probability of the other order
            gradient = w - weight * (x.T @ wrong)
            norm = float(np.linalg.norm(gradient))
            first = norm if first is None else first
            if norm <= NEWTON_TOLERANCE * max(first, 1.0):
                break
            hessian = (x.T * (weight * wrong * (1.0 - wrong))) @ x
            hessian[np.diag_indices_from(hessian)] += 1.0
            step = -cho_solve(cho_factor(hessian), gradient)
            slope, size = float(gradient @ step), 1.0
            # near the optimum (the step's predicted decrease below the objective's rounding) the full step is
            # Newton's quadratic convergence and is taken as it is; elsewhere Armijo's rule shortens it
            near = -slope <= 1e-10 * (1.0 + abs(value))
            for _ in range(31):  # steps of 1, 1/2, ... 2^-30 (about 1e-9)
                trial = w + size * step
                trial_value = objective(trial)
                if near or trial_value <= value + 1e-4 * size * slope:
                    break
                size *= 0.5
            else:  # no step lowers it: rounding's floor
                break
            w, value = trial, trial_value
        coef = basis @ w if basis is not None else w
    return LogisticFit(coef.reshape(1, -1), np.array([steps]))


#: liblinear's solver numbers of L2-regularised logistic regression, primal (trust-region Newton) and dual
LIBLINEAR_L2_LOGISTIC_PRIMAL, LIBLINEAR_L2_LOGISTIC_DUAL = 0, 7


class LogisticFit:
    """A fitted logistic regression without intercept: `coef_` (1, features), `n_iter_`, and the margins."""

    def __init__(self, coef, n_iter):
        self.coef_, self.n_iter_ = coef, n_iter

    def decision_function(self, x):
        """x @ coef as LogisticRegression computes it: a column plus its intercept 0.0, flattened."""
        import numpy as np

        return (np.asarray(x @ self.coef_.T) + 0.0).reshape(-1)


class ModelBackedAttacker:
    """Mixin of an attacker whose `model` argument is a model block (a hub id, a local path or `package:`).

    `param_key` is the params key of the attacker's block (build_attacker passes it), so messages about the
    model name `<key>.args.model`.
    """

    model: dict | str | None
    param_key: str | None

    def spec(self):
        from foilforge.models import ModelSpec

        return ModelSpec.from_params(self.model, f"{self.param_key or self.registry_name}.args.model")


class LinearPairAttacker(Attacker):
    """Logistic regression on phi(first) - phi(second), no intercept, trained on both orders: antisymmetric."""

    def __init__(self, C: float = 1.0, random_state: int = 0):
        self.C = C
        self.random_state = random_state

    def check(self) -> None:
        check_positive("C", self.C)

    #: hyperparameters of the classifier fit alone: settings that differ only in them share one feature map
    fit_only_params = ("C",)

    # subclasses: the feature map, built on the training pairs' texts
    def fit_features(self, pairs: list[Pair]) -> "LinearPairAttacker":
        """Build the feature map from the texts of `pairs` (never from which side a text is on); returns self."""
        raise NotImplementedError

    def features(self, texts: list[str], sides: list[tuple]):
        """Rows phi(text) of the current feature map, one per text (`sides`: each text's per-side numbers)."""
        raise NotImplementedError

    def feature_names_out(self) -> list[str]:
        """The names of the feature map's columns, in column order."""
        raise NotImplementedError

    def vectorize(self, pairs: list[Pair]):
        """Rows phi(first) - phi(second) of `pairs` on the current feature map (`fit_features` first)."""
        first = self.features([p.caption for p in pairs], [p.caption_features for p in pairs])
        second = self.features([p.foil for p in pairs], [p.foil_features for p in pairs])
        return first - second

    #: True when the feature map may be built once on every text of an out-of-fold run (a label-free vocabulary):
    #: a feature no training text has is a zero column, which L2 logistic regression weighs 0, so the margins equal
    #: those of per-fold features (out_of_fold_margins then vectorises once instead of once per fold)
    shares_features = False

    def fit(self, pairs: list[Pair], y=None) -> "LinearPairAttacker":
        pairs = captions_first(pairs, y)
        self.fit_features(pairs)
        return self.fit_difference(self.vectorize(pairs))

    def fit_difference(self, difference) -> "LinearPairAttacker":
        """Fit on rows phi(caption) - phi(foil) of the current feature map (both orders: antisymmetric)."""
        import numpy as np
        from scipy import sparse

        if difference.shape[1] == 0:  # no feature at all: no preference, every margin 0
            self.classifier_ = None
            return self
        if not sparse.issparse(difference):  # dense rows (scorer numbers, hidden states): Newton's method
            self.classifier_ = fit_dense_logistic(np.asarray(difference, dtype=float), self.C)
            return self
        x = sparse.vstack([difference, -difference])
        y = np.concatenate([np.ones(difference.shape[0]), np.zeros(difference.shape[0])])
        # liblinear's dual solver for sparse n-gram rows (far more features than pairs)
        self.classifier_ = fit_logistic(x, y, self.C, self.random_state, dual=True)
        return self

    def margins(self, pairs: list[Pair]):
        import numpy as np

        if not pairs:
            return np.zeros(0)
        return self.margins_difference(self.vectorize(pairs))

    def margins_difference(self, difference):
        import numpy as np

        if self.classifier_ is None:
            return np.zeros(difference.shape[0])
        return np.asarray(difference @ self.classifier_.coef_[0]).ravel()

    def top_features(self, k: int = 10) -> list[tuple[str, float]]:
        """The k features with the largest weights: > 0 marks captions, < 0 foils (why the attacker wins)."""
        import numpy as np

        if self.classifier_ is None:
            return []
        weights = self.classifier_.coef_[0]
        names = self.feature_names_out()
        order = np.argsort(-np.abs(weights), kind="stable")[:k]
        return [(names[j], round(float(weights[j]), 4)) for j in order if weights[j]]


class NgramPairAttacker(LinearPairAttacker):
    """The pair difference of binary n-gram vectors (`analyzer`: CountVectorizer's, set by the family)."""

    analyzer = "word"

    def __init__(self, ngram_range: list[int] = (1, 2), C: float = 1.0, min_df: int = 1, random_state: int = 0):
        self.ngram_range = ngram_range
        self.C = C
        self.min_df = min_df
        self.random_state = random_state

    def check(self) -> None:
        super().check()
        low_high = tuple(self.ngram_range)
        if len(low_high) != 2 or not all(isinstance(v, int) and v >= 1 for v in low_high) or low_high[0] > low_high[1]:
            raise ConfigError(f"argument ngram_range must be [low, high] with 1 <= low <= high, "
                              f"got {list(low_high)!r}")
        if not isinstance(self.min_df, int) or self.min_df < 1:
            raise ConfigError(f"argument min_df must be an integer >= 1, got {self.min_df!r}")

    def fit_features(self, pairs):
        texts = [t for p in pairs for t in (p.caption, p.foil)]
        tokens = {"token_pattern": WORD_TOKENS} if self.analyzer == "word" else {}
        if self.min_df == 1:  # each text split into n-grams once a stage (ngrams.py): the same rows, faster
            from foilforge.filters.attackers.ngrams import BinaryNgramVectorizer

            # no n-gram at all (empty texts): a vocabulary of nothing, every margin 0
            self.vectorizer_ = BinaryNgramVectorizer(analyzer=self.analyzer, ngram_range=tuple(self.ngram_range),
                                                     lowercase=True, allow_empty=True, **tokens)
        else:  # min_df counts the documents of this fit: CountVectorizer's own rule
            from sklearn.feature_extraction.text import CountVectorizer

            self.vectorizer_ = CountVectorizer(analyzer=self.analyzer, ngram_range=tuple(self.ngram_range),
                                               binary=True, lowercase=True, min_df=self.min_df, **tokens)
        self.vectorizer_.fit(texts)
        return self

    def features(self, texts, sides):
        return self.vectorizer_.transform(texts).astype(float)

    @property
    def shares_features(self) -> bool:  # a vocabulary with min_df > 1 counts documents: it must see only training texts
        return self.min_df == 1

    def feature_names_out(self) -> list[str]:
        return list(self.vectorizer_.get_feature_names_out())
