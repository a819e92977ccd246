"""Actant swap (VALSE §3.5, App. A.5): swap the two role fillers and realise the sentence again.

"A man shouts at a woman." -> "A woman shouts at a man." The foil is
realised from the swapped roles (not edited as a string), so the verb agrees
with the new subject ("People feed a dog." -> "A dog feeds people.").
Frames whose two fillers are the same noun are skipped: swapping them would
give the caption back.

Input: ingested SWiG samples (frames), or records {id, image_file, verb,
agent, patient[, preposition]}, or {id, image_file, caption, agent, patient}
where the verb and preposition are read off the caption and the caption is
kept as given.
"""

from __future__ import annotations

import random
from typing import Iterable

from foilforge.foiler import FOILERS, Foiler
from foilforge.foilers.lang.realise import (
    Action,
    action_from_sample,
    check_action_sample,
    phrase_span,
    shared_realiser,
)
from foilforge.records import Foil


def _same_filler(action: Action) -> bool:
    if action.agent_id and action.patient_id:
        return action.agent_id == action.patient_id
    return action.agent.text.lower() == action.patient.text.lower()


def _span(text: str, first, second) -> tuple[int, int] | None:
    """From the start of the first noun phrase to the end of the second: the part a swap changes."""
    head = phrase_span(text, first)
    if head is None:
        return None
    tail = phrase_span(text, second, head[1])
    return (head[0], tail[1]) if tail else None


@FOILERS.register("actant_swap.v1")
class ActantSwap(Foiler):
    phenomenon = "actions"
    source = "swig"
    golden = (
        ({"id": "g1", "verb": "shout", "agent": "man", "patient": "woman", "preposition": "at"},
         ("A man shouts at a woman.", "A woman shouts at a man.")),
        ({"id": "g2", "verb": "feeds", "agent": "people", "patient": "dog"},
         ("People feed a dog.", "A dog feeds people.")),
        ({"id": "g3", "caption": "A preacher preaches to the onlooker.", "agent": "preacher", "patient": "onlooker"},
         ("A preacher preaches to the onlooker.", "An onlooker preaches to a preacher.")),
        ({"id": "g4", "verb": "punch", "agent": "boxer", "patient": "boxer"}, None),
    )

    def __init__(self):
        pass  # no arguments: params.yaml `args: {}`

    def check_sample(self, sample: dict, path: str = "<input>", index=None) -> None:
        check_action_sample(sample, path, index)

    def foils_for(self, sample: dict, rng: random.Random) -> Iterable[Foil]:
        action = action_from_sample(sample)
        if action is None or action.patient is None or _same_filler(action):
            return []
        realiser = shared_realiser()
        caption = action.caption or realiser.realise(action.verb, action.agent, action.patient, action.preposition).text
        foil = realiser.realise(action.verb, action.patient, action.agent, action.preposition).text
        return [Foil(
            caption=caption, foil=foil, classes=action.agent.text, classes_foil=action.patient.text,
            caption_span=_span(caption, action.agent, action.patient),
            foil_span=_span(foil, action.patient, action.agent),
            extras={"foiling_method": "actant_swap", "verb": action.verb},
        )]
