"""Binary n-gram rows with each text split once a stage: the rows CountVectorizer(binary=True) gives, faster.

An out-of-fold run fits a vocabulary on the training texts of every fold, partition and grid setting, so the
same few thousand texts are split into n-grams hundreds of times. Here each text is split once (by
CountVectorizer's own analyzer) into ids of a table the stage shares; a fit is the union of its texts' ids and
a transform a lookup. The output is CountVectorizer's with min_df=1: the columns are the training n-grams
sorted as strings, each row holds 1 in its n-grams' columns in increasing column order, and data, index and
pointer types are the same. The table is per stage (foilforge/stage_state.py), like every cache of a run.
"""

from __future__ import annotations

from sklearn.base import BaseEstimator, TransformerMixin

from foilforge.stage_state import per_stage

#: (analyzer, ngram_range, lowercase, token_pattern) -> NgramTable
_TABLES: dict = per_stage({})


class NgramTable:
    """Every n-gram the stage met, numbered in the order met, and each text's sorted unique n-gram numbers."""

    def __init__(self, analyze):
        self.analyze = analyze
        self.number: dict[str, int] = {}
        self.names: list[str] = []
        self.rows: dict[str, object] = {}

    def row(self, text: str):
        import numpy as np

        found = self.rows.get(text)
        if found is None:
            numbers = []
            for gram in self.analyze(text):
                k = self.number.get(gram)
                if k is None:
                    k = self.number[gram] = len(self.names)
                    self.names.append(gram)
                numbers.append(k)
            found = self.rows[text] = np.unique(np.asarray(numbers, dtype=np.int64))
        return found


class BinaryNgramVectorizer(TransformerMixin, BaseEstimator):
    """CountVectorizer(binary=True, min_df=1) of these arguments, each text analysed once a stage.

    `fit` on texts without any n-gram raises ValueError, as CountVectorizer does, unless `allow_empty`: then the
    vocabulary is empty and every row has 0 columns.
    """

    def __init__(self, analyzer: str = "word", ngram_range=(1, 1), lowercase: bool = True,
                 token_pattern: str = r"(?u)\b\w\w+\b", allow_empty: bool = False):
        self.analyzer = analyzer
        self.ngram_range = ngram_range
        self.lowercase = lowercase
        self.token_pattern = token_pattern
        self.allow_empty = allow_empty

    def _table(self) -> NgramTable:
        key = (self.analyzer, tuple(self.ngram_range), self.lowercase, self.token_pattern)
        table = _TABLES.get(key)
        if table is None:
            from sklearn.feature_extraction.text import CountVectorizer

            analyze = CountVectorizer(analyzer=self.analyzer, ngram_range=tuple(self.ngram_range),
                                      lowercase=self.lowercase, token_pattern=self.token_pattern).build_analyzer()
            table = _TABLES[key] = NgramTable(analyze)
        return table

    def fit(self, texts, y=None) -> "BinaryNgramVectorizer":
        import numpy as np

        table = self._table()
        rows = [table.row(text) for text in texts]
        present = np.unique(np.concatenate(rows)) if rows else np.zeros(0, dtype=np.int64)
        if not len(present) and not self.allow_empty:
            raise ValueError("empty vocabulary: no text has an n-gram")
        names = [table.names[k] for k in present]
        order = sorted(range(len(names)), key=names.__getitem__)
        self.numbers_ = present[order]  # the table's number of each column's n-gram
        self.feature_names_ = np.asarray([names[k] for k in order], dtype=object)
        self.vocabulary_ = {name: j for j, name in enumerate(self.feature_names_)}
        # the column of every n-gram the table held at the fit (-1: not in the vocabulary); later ones are not in it
        self.column_ = np.full(len(table.names), -1, dtype=np.int64)
        self.column_[self.numbers_] = np.arange(len(self.numbers_))
        return self

    def transform(self, texts):
        import numpy as np
        from scipy import sparse

        table = self._table()
        rows = [table.row(text) for text in texts]
        which = np.repeat(np.arange(len(rows)), [len(r) for r in rows])
        numbers = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
        seen = numbers < len(self.column_)
        which, numbers = which[seen], numbers[seen]
        columns = self.column_[numbers]
        known = columns >= 0
        which, columns = which[known], columns[known]
        # within a row the columns increase, as after CountVectorizer's sort_indices
        order = np.lexsort((columns, which))
        indices = columns[order].astype(np.int32)
        indptr = np.zeros(len(rows) + 1, dtype=np.int32)
        np.cumsum(np.bincount(which, minlength=len(rows)), out=indptr[1:])
        return sparse.csr_matrix((np.ones(len(indices), dtype=np.int64), indices, indptr),
                                 shape=(len(rows), len(self.numbers_)))

    def get_feature_names_out(self, input_features=None):
        return self.feature_names_.copy()
