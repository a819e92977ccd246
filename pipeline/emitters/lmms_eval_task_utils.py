"""lmms-eval task functions for foilforge's instruments (copied next to the task YAMLs as `utils.py`).

Each task asks the model a two-option question: which of two captions (the caption and the foil, in the
order of the dataset's `option_a` / `option_b`) describes the image; the answer is a letter. This file is
loaded by lmms-eval itself (`!function utils.<name>` in the YAML), so it imports nothing of foilforge.
"""

import re

from PIL import Image

QUESTION = "Which caption describes the image?"
INSTRUCTION = "Answer with the option's letter from the given choices directly."


def doc_to_visual(doc):
    with Image.open(doc["images"]) as image:
        return [image.convert("RGB")]


def doc_to_text(doc, lmms_eval_specific_kwargs=None):
    kwargs = lmms_eval_specific_kwargs or {}
    pre, post = kwargs.get("pre_prompt", ""), kwargs.get("post_prompt", INSTRUCTION)
    return f"{pre}{QUESTION}\nA. {doc['option_a']}\nB. {doc['option_b']}\n{post}"


def doc_to_target(doc):
    return doc["correct_option"]


def parse_letter(text):
    """The option the model chose: the first standalone A or B of its answer ("B", "(A)", "B. a dog ..."), else None."""
    match = re.search(r"\b([AB])\b", text.strip())
    return match.group(1) if match else None


def process_results(doc, results):
    return {"accuracy": float(parse_letter(results[0]) == doc["correct_option"])}
