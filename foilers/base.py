"""The foiler interface.

A foiler turns samples of one source into caption/foil pairs. Subclasses fill
two small methods:

* `foils_for(sample, rng)` -> candidate `Foil`s for one sample (may be empty:
  a sample with nothing to foil is not an error);
* optionally `select(records, rng)` -> the instrument-level choice among all
  candidate records (class balance, caps, 50/50 splits).

The base class does the rest: per-sample random generators derived from the
global seed and the sample id (so output does not depend on input order and
never touches global random state), dropping identity and duplicate foils,
capping foils per sample, building the VALSE-format records, sorting by id.
`__init__` only stores arguments (they are the params.yaml `args`).
"""

from __future__ import annotations

import hashlib
import random
from typing import Iterable

from pipeline.records import Foil, foil_record
from pipeline.registry import Registry

FOILERS = Registry(
    "foiler",
    modules=(
        "foilers.existence",
        "foilers.counting",
        "foilers.coreference",
        "foilers.plurals",
        "foilers.relations",
        "foilers.actant_swap",
        "foilers.action_replacement",
        "foilers.predicate_noun",
        "foilers.bd2bb_decoys",
        "foilers.coreference_strict",
        "foilers.foil_it",
        "foilers.swap_obj",
        "foilers.swap_att",
    ),
)


def rng_for(seed: int, *keys) -> random.Random:
    """A generator that depends only on the seed and the given keys (e.g. a sample id)."""
    digest = hashlib.sha256("\x1f".join([str(seed), *map(str, keys)]).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


class Foiler:
    #: VALSE's `linguistic_phenomena` value
    phenomenon: str = ""
    #: name of the ingested table this foiler reads (see pipeline.stages.ingest)
    source: str = ""
    #: registry name, set by the registry decorator
    registry_name: str = ""
    #: (input sample, expected (caption, foil) or None) pairs the conformance suite checks
    golden: tuple = ()
    #: constructor args under which the golden examples hold, for foilers whose defaults name a model
    #: this machine may lack (the paper's spaCy pipeline): the offline choices. Empty = the defaults.
    golden_args: dict = {}

    max_foils_per_sample: int = 1

    # the run's context, set by `run` before `prepare`, so corpus-level work can name its params key
    # (instruments.<name>.args...), derive its random generator and show progress; None: not run by name
    _instrument: str | None = None
    _seed: int = 0
    _progress: bool = False

    def foils_for(self, sample: dict, rng: random.Random) -> Iterable[Foil]:
        raise NotImplementedError

    def select(self, records: list[dict], rng: random.Random) -> list[dict]:
        return records

    def validate_sample(self, sample: dict, path: str = "<input>", index=None) -> None:
        """Raise pipeline.errors.InputError if the sample lacks fields this foiler needs."""

    def prepare(self, samples: list[dict]) -> None:
        """Corpus-level state (attested spans, clusters) computed before foiling; default none."""

    def _key(self, arg: str) -> str:
        """The params.yaml key of one of this instrument's args, for error messages."""
        return f"instruments.{self._instrument or self.registry_name.rsplit('.', 1)[0]}.args.{arg}"

    @classmethod
    def write_native(cls, records: list[dict], output_dir, instrument: str) -> list[str]:
        """Write the kept records in the source's own release format too; returns the file names. Default: none."""
        return []

    def params(self) -> dict:
        import inspect

        sig = inspect.signature(type(self).__init__)
        return {k: getattr(self, k) for k in sig.parameters if k != "self" and hasattr(self, k)}

    def run(self, samples: list[dict], *, seed: int = 0, instrument: str | None = None, progress: bool = False) -> list[dict]:
        self._instrument, self._seed, self._progress = instrument, seed, progress
        instrument = instrument or self.registry_name
        samples = sorted(samples, key=lambda s: str(s["id"]))
        self.prepare(samples)
        records: list[dict] = []
        iterator = samples
        if progress:
            from tqdm import tqdm

            iterator = tqdm(samples, desc=f"foil {instrument}", unit="sample")
        for sample in iterator:
            rng = rng_for(seed, instrument, sample["id"])
            seen = set()
            kept = 0
            for foil in self.foils_for(sample, rng):
                if foil.foil.strip() == foil.caption.strip() or foil.key() in seen:
                    continue
                seen.add(foil.key())
                records.append(foil_record(sample, foil, instrument=instrument, foiler=self.registry_name,
                                           phenomenon=self.phenomenon, index=kept))
                kept += 1
                if kept >= self.max_foils_per_sample:
                    break
        records.sort(key=lambda r: r["id"])
        records = self.select(records, rng_for(seed, instrument, "select"))
        return sorted(records, key=lambda r: r["id"])
