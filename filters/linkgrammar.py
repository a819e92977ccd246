"""A rule-based grammaticality score from Link Grammar: the offline alternative to GRUEN.

NOT GRUEN: for users who cannot get a masked LM and a CoLA classifier (no model
hub). Records and metrics name it `linkgrammar`, never `gruen`, and its
scores are not written to VALSE's `grammaticality_scores` field.

Link Grammar (CMU; Debian `python3-link-grammar` + `link-grammar-dictionaries-en`)
parses a sentence into links between words; a word it cannot link is a
"null link". Per sentence:

    score = 1 / (1 + n)   where n = the fewest null links of any linkage,
    score = 0             when no linkage has <= max_null_count null links or
                          the parse runs out of max_parse_time seconds.

So a complete linkage scores 1.0, one unlinked word 0.5, two 0.33 ...; with
VALSE's min_score 0.8 only fully linked foils pass. A text's score is the mean
over its sentences of more than one word (the same sentence split as GRUEN);
a text with no such sentence scores 1.0 (nothing to object to).

With `relative_to_caption` (filters.grammaticality.relative_to_caption), n
is the number of null links the foil has beyond its caption: COCO captions
are often verbless fragments ("A bathroom with a towel hanging on the wall")
that Link Grammar cannot link completely, and a foil is a minimal edit of its
caption, so what the filter must catch is the edit making the text worse. The
variant is then recorded as `linkgrammar-relative`. A foil with no linkage
within the caps scores 0 either way.

Null-link search is exponential in n on long run-on texts, hence the caps.
"""

from __future__ import annotations

import atexit
import functools

from foilforge.batching import progress_bar
from foilforge.errors import ConfigError
from foilforge.filters.gruen import scored_sentences

NOT_INSTALLED = ("filters.grammaticality.variant is linkgrammar but the Link Grammar Python bindings cannot be imported: "
                 "install Debian's python3-link-grammar and link-grammar-dictionaries-en (scripts/install-system-deps.sh), "
                 "then run `make setup`, which links them into .venv; or set filters.grammaticality.variant: gruen")


def sentence_score(null_links: int | None) -> float:
    return 0.0 if null_links is None else 1.0 / (1.0 + null_links)


@functools.lru_cache(maxsize=1)
def english_dictionary():
    """The en dictionary, loaded once a process (it is only read): the pipeline's workers score stage after stage."""
    import linkgrammar

    from foilforge.timings import load_section

    with load_section("Link Grammar en dictionary"):
        dictionary = linkgrammar.Dictionary("en")
    # closed while the bindings are still loaded: left to the interpreter's teardown, its __del__ can run after
    # the C functions it calls are gone and print a TypeError to stderr
    atexit.register(dictionary.__del__)
    return dictionary


class LinkGrammar:
    def __init__(self, max_null_count: int = 3, max_parse_time: int = 10):
        try:
            import linkgrammar
        except ImportError as err:
            raise ConfigError(NOT_INSTALLED) from err
        self.lg = linkgrammar
        # the C library prints locale notes to stderr while loading the dictionary
        linkgrammar.LG_Error.set_handler(lambda error, data: None)
        self.dictionary = english_dictionary()
        self.options = linkgrammar.ParseOptions(min_null_count=0, max_null_count=max_null_count, linkage_limit=1,
                                                max_parse_time=max_parse_time, verbosity=0)

    def describe(self) -> str:
        version = self.lg.Clinkgrammar.linkgrammar_get_version()
        return f"{version} (en dictionary {self.dictionary.linkgrammar_get_dict_version()})"

    def null_links(self, sentence: str) -> int | None:
        """Fewest null links of a linkage, or None when none was found within the caps."""
        if not sentence.strip():  # the library crashes on empty input
            return 0
        parsed = self.lg.Sentence(sentence, self.dictionary, self.options)
        try:
            linkages = parsed.parse()
        except self.lg.LG_TimerExhausted:
            return None
        # null_count() is only meaningful when a linkage was found
        return parsed.null_count() if len(linkages) else None

    def score_texts(self, texts: list[str], progress: bool = False, captions: list[str] | None = None) -> list[dict]:
        """One result per text; with `captions`, null links are counted beyond each text's caption."""
        model = self.describe()
        cache: dict[str, int | None] = {}

        def nulls_of(text: str) -> list[int | None]:
            sentences = scored_sentences(text)
            for s in sentences:
                if s not in cache:
                    cache[s] = self.null_links(s)
            return [cache[s] for s in sentences]

        results = []
        bar = progress_bar(len(texts), "grammaticality: linkgrammar", progress)
        for k, text in enumerate(texts):
            nulls = nulls_of(text)
            if captions is None:
                scores = [sentence_score(n) for n in nulls]
                result = {"variant": "linkgrammar", "score": sum(scores) / len(scores) if scores else 1.0}
            else:
                caption_nulls = nulls_of(captions[k])
                if None in nulls:
                    extra = None
                else:
                    # a caption without a linkage within the caps sets no baseline: count the foil's own
                    baseline = 0 if None in caption_nulls else sum(caption_nulls)
                    extra = max(0, sum(nulls) - baseline)
                result = {"variant": "linkgrammar-relative", "score": sentence_score(extra),
                          "caption_null_links": caption_nulls, "extra_null_links": extra}
            results.append({"model": model, **result, "null_links": nulls, "n_sentences": len(nulls)})
            bar.update(1)
        bar.close()
        return results
