"""The params.yaml schema: one typed model of the whole file (pydantic v2), checked before anything runs.

`load_params` validates every file it reads against `Params`, and `foilforge check-params` prints every
problem it finds, each with its path:

    params.yaml instruments.relations.candidates_per_sample: expected an integer, got '3'
    params.yaml bias.on_exceed: expected 'fail' or 'warn', got 'ignore'
    params.yaml evaluate.image_rot: unknown key; allowed: image_root, scorers, scores_threshold

The schema holds the file's fixed shape: blocks, keys, types, ranges, choices, and the references
between blocks (an instrument's source is a key of `sources`; the attackers that `adversarial` and
`gate` name are defined under `attackers`). What depends on plug-ins (a foiler's or filter's
arguments, a reader's files, an attacker's family) is checked by the registries against the plug-in's
own signature (foilforge/registry.py), with the same `params.yaml <path>: ...` messages.

Validation never changes the file's values. `load_params` returns the file as written (a dict, which plug-in
arguments, provenance and profiles read) whose attributes are these typed blocks with their defaults
(`params.bias.on_exceed`; `typed_block` below): a default is written once, here.

The docstrings and `Field(description=...)` below are the reference of every key: `foilforge params-doc`
writes docs/params.md from them (foilforge/params_doc.py), and params.yaml keeps only values and short hints.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, WrapValidator, model_validator

from foilforge.config_errors import messages
from foilforge.errors import ConfigError
from foilforge.models import ModelFields
from foilforge.records import ITEM_MODES


def _keep_int(value, handler):
    """A number written as an integer (`log_base: 2`) keeps its YAML type once checked, so the values a stage reads
    from the typed blocks are the file's own (a report prints `2`, not `2.0`)."""
    checked = handler(value)
    return value if type(value) is int else checked


#: a number (an int or a float, as written)
Float = Annotated[float, WrapValidator(_keep_int)]
PositiveInt = Annotated[int, Field(ge=1)]
NonNegativeInt = Annotated[int, Field(ge=0)]
Share = Annotated[Float, Field(ge=0, le=1)]


class Block(BaseModel):
    """A params.yaml mapping: unknown keys are errors, values keep their YAML types (no "16" -> 16)."""

    model_config = ConfigDict(extra="forbid", strict=True)


# ---------------------------------------------------------------- sources and models

NonEmptyStr = Annotated[str, Field(min_length=1)]


class SourceBlock(Block):
    """A dataset on disk: the reader that parses it, its folder and the files the reader reads there. The shipped
    values read the embedded sample under data/sample/; to build the real benchmark, point `root` and the file
    names at your downloads (README, "Real data")."""

    format: str = Field(description="a registered reader (pipeline/sources/: coco, visual7w, swig, visdial, "
                                    "openimages, bd2bb, valse)")
    root: NonEmptyStr = Field(description="the folder the files are in")
    files: dict[str, NonEmptyStr] = Field(description="role -> file name under root (the roles are the reader's, "
                                                      "e.g. coco's `captions`; `foilforge check-params` names them)")
    split: str | None = Field(None, description="the split the samples are taken from; null: every split in the "
                                                "file (VALSE used Visual7W's test split)")
    dataset: str | None = Field(None, description="the `dataset` name the samples carry (null: the reader's own)")
    image_file_template: NonEmptyStr | Annotated[list[NonEmptyStr], Field(min_length=1)] | None = Field(
        None, description="how an image id becomes a file name (`{image_id}`; visdial requires it). A list: each "
                          "image gets the template whose file exists under `files.images` (VisDial train draws on "
                          "COCO train2014 and val2014 images: `files: {dialogs: visdial_1.0_train.json, images: "
                          "images}` with both COCO templates)")


class ModelBlock(ModelFields):
    """A `models.<role>` block: which model (a hub id, a local directory, or package:<module>) and how to run it."""

    model_config = ConfigDict(extra="forbid", strict=True)

    name_or_path: str | None = Field(None, description="a hub id, a local directory, or package:<module> for a "
                                                      "model shipped in an installed wheel; absent: the role's "
                                                      "documented default (the stage that loads it says so)")
    label_map: dict[int, Literal["entailment", "neutral", "contradiction"]] | None = Field(
        None, description="nli only: the label of each output of the checkpoint (the ANLI authors' order: "
                          "{0: entailment, 1: neutral, 2: contradiction}; docs/reference.md §3)")
    sanity_check: bool | None = Field(None, description="nli only: check the label order on known pairs before "
                                                        "filtering")
    max_batch_tokens: PositiveInt | None = Field(None, description="grammar_lm, cola and nli: padded tokens a "
                                                                   "batch besides batch_size rows (a GPU's knob)")
    pretrained: str | None = Field(None, description="open_clip only: a pretrained tag of open_clip (openai, "
                                                     "laion2b_s34b_b79k; open_clip.list_pretrained()) or a "
                                                     "checkpoint file")


# ---------------------------------------------------------------- one instrument

class InstrumentFilters(Block):
    run: list[str] = Field([], description="score: the filters that score it (run cheapest first whatever the "
                                           "order)")
    keep: dict[str, dict[str, Any] | None] = Field({}, description="select: each filter's keep rule ({}: the "
                                                                   "filter's defaults; null: scored, not applied)")


class BiasSettings(Block):
    """Thresholds of the bias checks (VALSE §4.1, Table 5); null: not checked."""

    items: Literal[ITEM_MODES] | None = Field(None, description="how changed items are counted: direct (caption "
                                                                "items vs foil items), or swap when both items are "
                                                                "on both sides (JS 0 by construction); null: direct")
    js_max: Float | None = Field(None, description="highest JS divergence between the caption and foil items "
                                                   "(VALSE's highest released JS is 0.742, plurality)")
    js_valid_max: Float | None = Field(None, description="highest JS divergence of the valid items (human votes)")
    max_majority_share: Share | None = Field(None, description="highest share of the most frequent item on either "
                                                               "side (class balance)")
    min_lexical_items: NonNegativeInt | None = Field(None, description="fewest distinct changed items over both "
                                                                       "sides")


class AdversarialOverrides(Block):
    """`adversarial`'s keys, each optional (an instrument's overrides: a key written wins, null included; a key left out
    takes the top-level value; foilforge/settings.py), plus `enabled`."""

    enabled: bool = Field(True, description="false: no adversarial filter for this instrument")
    attackers: Annotated[list[str], Field(min_length=1)] | None = None
    target: Share | None = None
    min_keep: Share | None = None
    method: Literal["aflite", "balance_features"] | None = None
    folds: Annotated[int, Field(ge=2)] | None = None
    rounds: PositiveInt | None = None
    slice: Annotated[Float, Field(gt=0, le=1)] | None = None
    features_per_round: PositiveInt | None = None
    max_js_rise: Share | None = None
    balance: list[str] | None = Field(None, description="side features kept 50/50 between captions and foils "
                                                        "(filters/adversarial.py SIDE_FEATURES, e.g. negation)")
    seed: NonNegativeInt | None = None
    max_iterations: PositiveInt | None = None
    patience: PositiveInt | None = None
    suspect_below: Share | None = None
    transfer: bool | None = None
    pool: list[str] | None = Field(None, description="released files of this instrument's phenomenon "
                                                     "(transfer training only)")


class InstrumentValidation(Block):
    gold: list[str | int] = Field([], description="item ids whose caption is known to be right (qualification "
                                                  "of annotators)")
    votes: str | None = Field(None, description="the votes file; null: data/annotations/<instrument>.csv")


class InstrumentPairing(Block):
    """pair: the pairer that finds a second image the foil describes (Winoground groups; docs/pairing.md)."""

    pairer: str | None = Field(None, description="a registered pairer (foilers/pairers/); null: the source says "
                                                 "nothing about another image, say `why`")
    args: dict[str, Any] = Field({}, description="the pairer's arguments (checked against its signature)")
    why: str | None = Field(None, description="printed by the data card when pairer is null")
    prefer_pairable: bool | None = Field(None, description="left out: the top-level `pairing.prefer_pairable`")
    min_support: Share | None = Field(None, description="left out: the top-level `pairing.min_support`")


class InstrumentBlock(Block):
    """Everything about one instrument lives in its block, and an instrument's name appears nowhere else in the
    file: adding a phenomenon is one module in foilers/ and one block here (README, "Add a phenomenon"). Every
    per-instrument stage of dvc.yaml runs over these blocks (`foreach`) and tracks only its own keys of the block,
    so a keep threshold reruns that instrument's select stage (seconds), not its models.

    Each block starts with `<<: *instrument`, the defaults under `shared` (a YAML merge key: a key set in the
    block wins), so that every key a stage tracks is there. The shipped model arguments are the offline choices
    that run without a model hub (docs/offline_models.md): delete an `args.ranker`/`proposer` block to get the
    paper's kind of model (the foiler's default), or set a hub id or local path yourself (README, "Models");
    bd2bb_decoys without `encoder` gets all-mpnet-base-v2, not the paper's USE (a TensorFlow Hub model). All the
    paper's models at once: profiles/paper.yaml (`make repro PROFILE=paper`).

    A released benchmark is re-filtered by a source `{format: valse, root: <your VALSE data dir>, files:
    {instrument: relations.json}}` (say `valse_relations`) and an instrument `{<<: *instrument, foiler:
    released.v1, source: valse_relations, args: {phenomenon: relations}, filters: *filters_grammatical}`: the
    released caption/foil pairs pass through score, select (the refinement), bias, baseline and export."""

    foiler: str = Field(description="foil: a registered foiler (foilers/)")
    source: str = Field(description="foil: the ingested table it reads (a key of `sources`)")
    args: dict[str, Any] = Field({}, description="foil: the foiler's arguments (`foilforge check-params` checks "
                                                 "them against the foiler's signature)")
    candidates_per_sample: PositiveInt | None = Field(None, description="foil: foils kept per sample (the "
                                                                        "plausibility refinement in select picks "
                                                                        "one); null: the foiler's own cap")
    max_samples: PositiveInt | None = Field(None, description="foil: foil only the first N samples, in file order; "
                                                              "null: all")
    samples_per_image: PositiveInt | None = Field(None, description="foil: foil at most N samples of an image, the "
                                                                    "first in file order (COCO: the first caption of "
                                                                    "each image with 1); the pair stage still reads "
                                                                    "every sample as evidence. null: all")
    filters: InstrumentFilters = Field(InstrumentFilters(), description="score and select: which filters score it "
                                                                        "and their keep rules")
    bias: BiasSettings = Field(BiasSettings(), description="bias: how changed items are counted and thresholds "
                                                           "over `bias.defaults`")
    adversarial: AdversarialOverrides = Field(AdversarialOverrides(), description="select: overrides of the "
                                                                                  "`adversarial` block")
    gate: Literal["fail", "report"] = Field("report", description="baseline and export: report (exported; when a "
                                                                  "gate attacker solves the set, the card names it "
                                                                  "under its verdict table) or fail (export refuses "
                                                                  "it)")
    validation: InstrumentValidation = Field(InstrumentValidation(), description="validate: gold item ids and the "
                                                                                 "votes file")
    pairing: InstrumentPairing = Field(InstrumentPairing(), description="pair: the pairer of second images")


# ---------------------------------------------------------------- shared blocks

class AttackerBlock(Block):
    attacker: str = Field(description="a registered attacker (word_ngram.v1, char_ngram.v1, scorer_features.v1, "
                                      "edit_tokens.v1, boosted_features.v2, ngram_bayes.v1, transformer_pair.v1, "
                                      "hidden_probe.v1)")
    args: dict[str, Any] = Field({}, description="its arguments (checked against its signature)")


class AdversarialBlock(Block):
    """The adversarial filter (select stage, filters/adversarial.py): AFLite with the attackers in the loop of the
    plausibility refinement, until every filter attacker picks the caption on at most `target` of the kept pairs
    out of sample (from both sides: within [1 - target, target]), keeping at least `min_keep` of the pairs the
    refinement keeps without attackers (else the select report says it cannot). A caption's other foils are tried
    before the caption is dropped. An instrument's `adversarial` block overrides these keys."""

    attackers: Annotated[list[str], Field(min_length=1)] = Field(["word_ngram", "char_ngram"], description="the "
                                                                 "filter's attackers (names under `attackers`)")
    target: Share = Field(0.55, description="every filter attacker within [1 - target, target] of the kept pairs")
    min_keep: Share = Field(0.25, description="share of the refinement's kept pairs the filter must keep")
    method: Literal["aflite", "balance_features"] = Field("aflite", description="aflite: drop the most "
                                                          "predictable pairs; balance_features: balance the "
                                                          "heaviest n-grams' counts between kept captions and foils "
                                                          "with a 0/1 program")
    folds: Annotated[int, Field(ge=2)] = Field(5, description="grouped folds (by caption) of the out-of-fold "
                                                              "predictions")
    rounds: PositiveInt = Field(8, description="fresh grouped partitions per attacker per round (AFLite's "
                                               "ensemble)")
    slice: Annotated[Float, Field(gt=0, le=1)] = Field(0.05, description="aflite: share of the kept pairs dropped "
                                                                         "per round")
    features_per_round: PositiveInt = Field(5, description="balance_features: n-gram features balanced per round")
    max_js_rise: Share | None = Field(0.0, description="how far the JS of the changed items may rise above the "
                                                       "unrefined set's; null: no bound")
    balance: list[str] = Field([], description="side features kept 50/50 between captions and foils (negation)")
    seed: NonNegativeInt = Field(0, description="seed of the folds and attackers")
    max_iterations: PositiveInt = Field(60, description="most rounds the filter runs")
    patience: PositiveInt = Field(3, description="rounds without coming closer to chance before the filter stops "
                                                 "(the closest round's set is kept)")
    suspect_below: Share = Field(0.2, description="without votes: a kept pair predicted right at most this often is "
                                                  "a suspect (select report)")
    transfer: bool = Field(True, description="each attacker is also fitted on the pairs removed so far and the "
                                             "pool; its predictions of the kept pairs count as one more round")
    pool: list[str] = Field([], description="released files of the same phenomenon: transfer training only (per "
                                            "instrument: instruments.<I>.adversarial.pool)")


#: the message for the gate's band keys, which the equivalence tests' margin and alpha stand in for
GATE_BAND_KEYS = ("lower and upper are not gate keys: certification tests every reading within chance +- margin at "
                  "level alpha; write margin (e.g. 0.12) and alpha (e.g. 0.05) instead")


class GateBlock(Block):
    """The release gate (the baseline stage measures, export enforces): attackers kept apart from the filter (fresh
    folds and seed, and a family the filter did not use: `foilforge check-params` checks it), each at most
    `max_accuracy` out of fold on the kept pairs (multiple choice: BD2BB picks the target among its options). An
    instrument above it stops export with a message naming it, unless `instruments.<I>.gate: report`. Under 20 pairs
    an instrument does not pass. Certified (manifest, refilter's report.json, the card's verdict table): every
    reading (each attacker within the kept set, and fitted on the removed pairs) shown within chance +- `margin` by
    two one-sided exact binomial tests at level `alpha`; a set on which one attacker truly reads chance + margin is
    certified with probability at most `alpha`. A reading is called above or below chance (solvable,
    over-balanced) only when an exact test excludes chance at familywise level `alpha` (Holm over the readings),
    otherwise it is inconclusive, with about the pairs it would take (filters/certification.py; error rates by
    simulation: docs/blind-proof.md)."""

    attackers: Annotated[list[str], Field(min_length=1)] = Field(
        ["word_ngram", "char_ngram", "scorer_features", "ngram_bayes"],
        description="the gate's attackers (names under `attackers`)")
    max_accuracy: Annotated[Float, Field(gt=0, le=1)] = Field(0.55, description="highest out-of-fold accuracy of any "
                                                                                "gate attacker")
    folds: Annotated[int, Field(ge=2)] = Field(5, description="grouped folds (by caption)")
    repeats: PositiveInt = Field(5, description="fresh grouped partitions averaged per attacker (seeds seed, "
                                                "seed+1, ...)")
    before_repeats: PositiveInt | None = Field(
        1, description="partitions averaged for the readings on the records without the refinement (the card's "
                       "'before'): descriptive, no part of the certification, so fewer than `repeats` make the gate "
                       "cheaper and only those readings noisier; null: `repeats`")
    before_setting: Literal["chosen", "searched"] = Field(
        "chosen", description="the setting a gate attacker with a grid reads the records without the refinement at: "
                              "chosen, the one its nested search chose on the kept pairs (one fit a fold: the "
                              "readings say how the same attacker read the set before); searched, a nested search "
                              "inside each training fold, as on the kept pairs (about a dozen fits a fold)")
    min_repeats: Annotated[int, Field(ge=2)] | None = Field(
        2, description="partitions every attacker gets on the kept pairs; each further one (up to `repeats`) only "
                       "while the reading's decisions (within, chance excluded, max_accuracy, the card's words) "
                       "could still change with the partitions left (filters/certification.py `settled`); null: "
                       "all `repeats`")
    seed: NonNegativeInt = Field(101, description="seed of the gate's partitions (apart from the filter's)")
    margin: Annotated[Float, Field(gt=0, lt=0.5)] = Field(
        0.12, description="certified: every reading shown within chance +- margin (0.12: 38-62% around 50%)")
    alpha: Annotated[Float, Field(gt=0, lt=0.5)] = Field(
        0.05, description="level of the equivalence tests (the chance that a set one attacker reads at chance + "
                          "margin is certified) and familywise level of calling a reading above or below chance")
    transfer: bool = Field(True, description="also certify each attacker fitted on the removed pairs and the pool "
                                             "(the instrument's adversarial.pool)")
    grid: dict[str, dict[str, list]] = Field({}, description="attacker -> {argument: [values]}: certified at the "
                                                             "strongest combination, chosen by nested grouped CV "
                                                             "inside each training fold (never on the scored fold)")

    @model_validator(mode="before")
    @classmethod
    def _no_band(cls, data):
        if isinstance(data, dict) and {"lower", "upper"} & set(data):
            raise ValueError(GATE_BAND_KEYS)
        return data


class BiasBlock(Block):
    """Bias checks (bias stage; VALSE §4.1, Table 5): JS divergence of the changed items, class balance, lexical
    items. `defaults` apply to every instrument; an instrument's own `bias` block overrides them."""

    log_base: Annotated[Float, Field(gt=1)] = Field(2, description="logarithm base of the JS divergence (2 bounds "
                                                                  "it in [0, 1])")
    on_exceed: Literal["fail", "warn"] = Field("fail", description="a threshold exceeded: fail (the stage fails) or "
                                                                   "warn (reported in bias.json)")
    plot_top_k: PositiveInt = Field(30, description="items in the frequency plot")
    defaults: BiasSettings = Field(BiasSettings(), description="thresholds for every instrument")


class BlindCheckBlock(Block):
    """The held-out blind check (baseline stage): acc_r before and after the refinement under a text-only scorer
    the refinement did not balance against (`foilforge check-params` rejects one of
    filters.plausibility.scorers). With a hub: `{kind: causal_lm, name_or_path: gpt2}` while refining on SmolLM2
    (or the reverse). Offline no second causal LM runs (docs/offline_models.md), so the shipped held-out scorer is
    a character 5-gram with Witten-Bell smoothing: a count model like caption_ngram (same family, other units and
    smoothing), not a neural LM, and the data card names it as such."""

    held_out: dict[str, Any] | None = Field(None, description="a text scorer block (filters/plausibility.py "
                                                              "build_text_scorer); null: no blind check")


class EvaluateBlock(Block):
    """evaluate: scorers run on the exported benchmark."""

    scorers: list[str] = Field(["text_lm"], description="text_lm (models.text_baseline), image_text "
                                                        "(models.image_text over the images under image_root), "
                                                        "open_clip (models.open_clip)")
    image_root: str | None = Field(None, description="the source images (file names as in image_file); null or "
                                                     "no images there: the image scorers are skipped")
    scores_threshold: Float | None = Field(None, description="a scores file (--scores) of match scores: the "
                                                             "threshold that gives acc, p_c and p_f")


class RayEngineBlock(Block):
    address: str | None = Field(None, description="null: start a Ray on this machine; a cluster: auto or "
                                                  "ray://HEAD:10001")
    num_cpus: PositiveInt | None = Field(None, description="a local Ray's CPUs (null: all of this machine's)")
    workers: PositiveInt = Field(2, description="actors in each stage's pool, each with its own copy of the models")
    cpus_per_worker: Annotated[Float, Field(gt=0)] = Field(1.0, description="also the threads an actor's fast "
                                                                           "tokenizer encodes on (whole cores, at "
                                                                           "least 1)")
    gpus_per_worker: Annotated[Float, Field(ge=0)] = Field(0.0, description="e.g. 0.25: four actors share one GPU")


class EngineBlock(Block):
    """Where the per-batch stage work of foil and score runs (pipeline/engine/). Both engines cut the records into
    the same batches and give torch the same threads, so both write the same bytes: only batch_size and
    threads_per_worker change the output (a CPU model's float sums depend on both). `make repro ENGINE=ray` (or
    FOILFORGE_ENGINE=ray) picks Ray without changing what DVC tracks."""

    name: Literal["local", "ray"] = Field("local", description="local: this process (what `make repro` runs); ray: "
                                                               "Ray Data actor pools, each actor loading the "
                                                               "filters' models once")
    batch_size: PositiveInt = Field(4096, description="samples (foil) or records (score) a batch, for both engines: "
                                                      "batched model scores depend on it")
    threads_per_worker: PositiveInt | None = Field(None, description="torch threads in every worker, both engines "
                                                                     "(null: the stage process's own; 1 for a pool "
                                                                     "of many actors)")
    shard_rows: PositiveInt = Field(100_000, description="rows a Parquet shard: foil and score also write "
                                                         "data/{foils,scored}/<I>.parquet/ (pipeline/shards.py)")
    ray: RayEngineBlock = Field(RayEngineBlock(), description="the ray engine's cluster and actors")


#: the export stage's harness formats (pipeline/emitters); VALSE JSON, the HF rows and the manifest are always written
EXPORT_FORMATS = ("sugarcrepe", "lmms_eval", "vlmevalkit", "parquet")


class ExportBlock(Block):
    """export: besides VALSE JSON, the HF dataset (rows/, with MTEB's images / caption / negative_caption columns),
    the manifest and the data card, the files evaluation harnesses load as they are (README "Evaluation
    harnesses"). `foilforge export --format NAME` writes one of them again from an existing export."""

    formats: list[Literal[EXPORT_FORMATS]] = Field(list(EXPORT_FORMATS), description="sugarcrepe (CLIP_benchmark, "
                                                   "t2v_metrics), lmms_eval (task YAML), vlmevalkit (MCQ TSV), "
                                                   "parquet (the canonical table, one file per instrument)")
    image_root: str = Field("data/images", description="where image_file lives: the harness files name images "
                                                       "under it")


class ValidationBlock(Block):
    """Human judgements on the foils (validate stage; VALSE §4.4, App. E; `foilforge annotate`, README "Human
    validation"). Votes files are batch-results CSVs (Input.item_id, WorkerId, Answer.choice) kept under
    data/annotations/ (the validate stage depends on that directory); each instrument's gold items and votes
    file: instruments.<I>.validation."""

    seed: NonNegativeInt = Field(0, description="which items show the caption first; do not change once "
                                                "annotation has started")
    annotators_per_item: PositiveInt = Field(3, description="VALSE: 3")
    valid_min_caption: PositiveInt = Field(2, description="valid: at least this many chose the caption, not the foil "
                                                          "(VALSE: 2 of 3)")
    gold_threshold: Share = Field(0.7, description="annotators preferring the caption on fewer gold items are "
                                                   "excluded (VALSE: 70%)")
    export: Literal["valid", "all"] = Field("valid", description="valid: export only the valid items once votes "
                                                                 "exist; all: export every item")

    @model_validator(mode="after")
    def _majority_possible(self):
        if self.valid_min_caption > self.annotators_per_item:
            raise ValueError(f"valid_min_caption ({self.valid_min_caption}) cannot exceed annotators_per_item "
                             f"({self.annotators_per_item})")
        return self


class PairingBlock(Block):
    """pair and select (docs/pairing.md)."""

    prefer_pairable: bool = Field(True, description="select keeps, among the candidates of one sample that pass the "
                                                    "keep rules, one that has a partner image when any has (an "
                                                    "instrument's `pairing.prefer_pairable` overrides)")
    min_support: Share = Field(1.0, description="the share of a group's claims (what caption_1 says of image_1) "
                                                "that the partner's captions or annotations must state; 1.0: every "
                                                "claim. A partner below it is never offered, counted by reason (an "
                                                "instrument's `pairing.min_support` overrides)")


class Params(Block):
    """foilforge's parameters (params.yaml). Every stage reads only its own blocks (dvc.yaml `params:`), so changing
    a threshold reruns only the stages that use it."""

    seed: NonNegativeInt = Field(0, description="the foil stage's seed (a foiler's random choices)")
    sources: dict[str, SourceBlock] = Field({}, description="where each dataset lives, by name (an instrument's "
                                                            "`source`)")
    shared: dict[str, Any] = Field({}, description="read by no stage: values the instrument blocks use by reference "
                                                   "(YAML anchors, `*name`); `shared.instrument` holds every key a "
                                                   "per-instrument stage tracks")
    instruments: dict[str, InstrumentBlock] = Field({}, description="one block per instrument (a phenomenon's foils "
                                                                    "from one source)")
    models: dict[str, ModelBlock | str] = Field({}, description="models shared by several stages, by role: "
                                                "grammar_lm (GRUEN's LM term; paper: bert-base-cased), cola (GRUEN's "
                                                "CoLA classifier), nli (paper: ALBERT-xxlarge-v2 on "
                                                "SNLI+MNLI+FEVER+ANLI), length_tokenizer (paper: a BERT tokenizer), "
                                                "text_baseline (VALSE Table 2: GPT-1 / GPT-2), image_text (evaluate's "
                                                "image-text scorer), open_clip (evaluate's open_clip scorer: an "
                                                "open_clip model name, hf-hub:org/repo or local-dir:/path). The "
                                                "shipped values are the offline choices `make repro` runs without a "
                                                "model hub (docs/offline_models.md). A bare string is a "
                                                "name_or_path")
    filters: dict[str, dict[str, Any] | None] = Field({}, description="each filter's settings, shared by every "
                                                      "instrument (checked against the filter's signature; which "
                                                      "filters score an instrument and their keep rules are in "
                                                      "instruments.<I>.filters): length (special_tokens: count "
                                                      "[CLS]/[SEP] too), grammaticality (variant: linkgrammar or "
                                                      "gruen, the paper's, with models.grammar_lm and models.cola; "
                                                      "relative_to_caption, linkgrammar only: count the null links "
                                                      "the foil adds to its caption, as COCO captions are often "
                                                      "verbless fragments), plausibility (scorers: the text-only "
                                                      "scorers of caption and foil whose gaps the refinement "
                                                      "balances around zero; a causal LM, with a hub gpt2 as VALSE "
                                                      "Table 2, and a blind caption prior of another family, a word "
                                                      "trigram cross-fitted over 5 folds so no caption scores "
                                                      "itself). No NLI or CoLA model runs offline, so the sample "
                                                      "build uses Link Grammar (named `linkgrammar` in every record "
                                                      "and report, never GRUEN) and leaves nli out of the run lists; "
                                                      "with a hub, set `variant: gruen` and add nli to the run lists "
                                                      "(VALSE §4.3)")
    blind_check: BlindCheckBlock = Field(BlindCheckBlock(), description="the held-out blind check of the baseline "
                                                                        "stage")
    attackers: dict[str, AttackerBlock] = Field({}, description="trained text-only attackers (filters/attackers/): models fitted on some caption/foil pairs "
                                                "that pick the caption of others without the image, always out of "
                                                "fold with folds grouped by caption; `adversarial` and `gate` name "
                                                "them")
    adversarial: AdversarialBlock | None = Field(None, description="the adversarial filter of the select stage; "
                                                                   "null: none")
    gate: GateBlock | None = Field(None, description="the release gate; null: none")
    bias: BiasBlock = Field(BiasBlock(), description="the bias stage's checks")
    evaluate: EvaluateBlock = Field(EvaluateBlock(), description="the evaluate command's scorers")
    export: ExportBlock = Field(ExportBlock(), description="the export stage's files")
    engine: EngineBlock = Field(EngineBlock(), description="where the foil and score stages' batches run")
    validation: ValidationBlock = Field(ValidationBlock(), description="human validation")
    pairing: PairingBlock = Field(PairingBlock(), description="the pairing-aware choice of select")


def _mapping(value) -> dict:
    return value if isinstance(value, dict) else {}


def typed_block(params: dict, name: str, where: str = "params.yaml"):
    """Top-level block `name` of a params mapping as the schema's typed value: its model, with the schema's defaults
    for the keys the file leaves out, or the field's default when the file has no such block. A KeyError for a
    name that is not a block of the schema; a ConfigError naming every problem of a block that does not validate."""
    field = Params.model_fields[name]
    if name not in params:
        return field.get_default(call_default_factory=True)
    try:
        return getattr(Params.model_validate({name: params[name]}), name)
    except ValidationError as err:
        found = _messages(err, f"{where} ")
        raise ConfigError(f"{len(found)} problem(s) in {where}:\n" + "\n".join(found)) from None


def reference_problems(params: dict) -> list[str]:
    """Names one block uses that another must define: an instrument's source, the attackers named.

    Read off the raw mapping, so they are reported alongside the shape problems, not only once those are fixed.
    """
    sources, attackers = _mapping(params.get("sources")), _mapping(params.get("attackers"))
    defined = ", ".join(sorted(attackers)) or "none"
    found = []
    for name, spec in _mapping(params.get("instruments")).items():
        spec = _mapping(spec)
        source = spec.get("source")
        if isinstance(source, str) and sources and source not in sources:
            found.append(f"instruments.{name}.source: {source!r} is not a key of `sources` ({', '.join(sorted(sources))})")
        named = _mapping(spec.get("adversarial")).get("attackers")
        for attacker in named if isinstance(named, list) else []:
            if attacker not in attackers:
                found.append(f"instruments.{name}.adversarial.attackers: {attacker!r} is not defined under `attackers` "
                             f"(defined: {defined})")
    for key in ("adversarial", "gate"):
        named = _mapping(params.get(key)).get("attackers")
        for attacker in named if isinstance(named, list) else []:
            if attacker not in attackers:
                found.append(f"{key}.attackers: {attacker!r} is not defined under `attackers` (defined: {defined})")
    return found


#: keys dvc.yaml's per-instrument stages track (DVC fails on a tracked key the file lacks): `<<: *instrument` gives them
DVC_TRACKED_KEYS = tuple(InstrumentBlock.model_fields)


# ---------------------------------------------------------------- messages

def problems(params: dict, where: str = "params.yaml", dvc_keys: bool = False) -> list[str]:
    """Every schema problem of a params mapping, one line each: `<where> <path>: <what>, got <value>`.

    `dvc_keys`: also require each instrument block to spell out the keys dvc.yaml tracks (`<<: *instrument`).
    """
    if not isinstance(params, dict):
        return [f"{where}: expected a mapping at the top level, got {type(params).__name__}"]
    found = []
    try:
        Params.model_validate(params)
    except ValidationError as err:
        found += _messages(err, f"{where} ")
    found += [f"{where} {line}" for line in reference_problems(params)]
    if dvc_keys:
        for name, spec in sorted((params.get("instruments") or {}).items()):
            if isinstance(spec, dict):
                missing = [k for k in DVC_TRACKED_KEYS if k not in spec]
                if missing:
                    found.append(f"{where} instruments.{name}: missing key(s) {', '.join(missing)}, which dvc.yaml's "
                                 f"stages track (start the block with `<<: *instrument`)")
    return sorted(dict.fromkeys(found), key=found.index)


def check(params: dict, where: str = "params.yaml") -> dict:
    """params unchanged, or a ConfigError listing every problem."""
    found = problems(params, where)
    if found:
        raise ConfigError(f"{len(found)} problem(s) in {where}:\n" + "\n".join(found))
    return params


_MODEL_NAMES = {name for name, obj in dict(globals()).items() if isinstance(obj, type) and issubclass(obj, BaseModel)}


def _messages(err: ValidationError, prefix: str) -> list[str]:
    """`config_errors.messages` against this schema: unknown keys name the keys Params allows there."""
    return messages(err, prefix, root=Params, model_names=_MODEL_NAMES)
