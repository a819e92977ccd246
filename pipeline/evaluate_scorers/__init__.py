"""The scorers `foilforge evaluate` runs, one module each (text_lm, image_text, open_clip), registered in
`SCORERS` (base.py) and built from `evaluate.scorers` by `build_scorers`; a scores file computed elsewhere is read by
scores_file.py."""

from __future__ import annotations

from foilforge.pipeline.evaluate_scorers import image_text, open_clip, text_lm  # noqa: F401 - they register
from foilforge.pipeline.evaluate_scorers.base import SCORERS, check_settings, scorer_config
from foilforge.pipeline.evaluate_scorers.scores_file import ScoresFileScorer, read_scores_file


def build_scorers(params: dict, scores_files) -> tuple[list, dict]:
    """(the scorers `evaluate.scorers` names that could be built, then one per scores file; {scorer: why it was
    skipped})."""
    settings = check_settings(params)
    scorers, skipped = [], {}
    for name in settings.scorers:
        scorer = SCORERS.get(SCORERS.newest(name))(params, settings, skipped)
        if scorer is not None:
            scorers.append(scorer)
    scorers.extend(ScoresFileScorer(p) for p in scores_files or [])
    return scorers, skipped


__all__ = ["SCORERS", "ScoresFileScorer", "build_scorers", "check_settings", "read_scores_file", "scorer_config"]
