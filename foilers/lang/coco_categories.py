"""COCO's 80 object categories (instances_2017 ids, names, supercategories) and the words captions use for them.

One row per category: (id, name, supercategory, foil word, synonyms). The foil
word is what a foil inserts (FOIL-it's short names: "phone" for "cell phone",
"table" for "dining table", "ball" for "sports ball"); synonyms are the
singular surface forms that count as a mention in a caption, multi-word ones
included ("hot dog", "cell phone", "teddy bear"). Plurals are derived with
inflect (`mention_forms`); words already plural ("skis", "scissors") are listed
as such. A word that names two categories is left out of both ("bike":
bicycle or motorcycle; "bat": animal or baseball bat is kept for the bat, as
COCO has no bat animal).
"""

from __future__ import annotations

import functools

#: (id, name, supercategory, foil word, synonyms)
COCO_CATEGORIES: tuple[tuple[int, str, str, str, tuple[str, ...]], ...] = (
    (1, "person", "person", "person", ("person", "man", "woman", "boy", "girl", "child", "kid", "guy", "lady", "people")),
    (2, "bicycle", "vehicle", "bicycle", ("bicycle", "cycle")),
    (3, "car", "vehicle", "car", ("car", "automobile", "taxi", "cab", "sedan", "suv")),
    (4, "motorcycle", "vehicle", "motorcycle", ("motorcycle", "motorbike", "motor bike", "scooter", "moped", "dirt bike")),
    (5, "airplane", "vehicle", "airplane", ("airplane", "plane", "jet", "aircraft", "airliner", "aeroplane", "jetliner")),
    (6, "bus", "vehicle", "bus", ("bus", "school bus", "double decker bus")),
    (7, "train", "vehicle", "train", ("train", "locomotive", "subway train")),
    (8, "truck", "vehicle", "truck", ("truck", "pickup truck", "lorry", "firetruck", "fire truck")),
    (9, "boat", "vehicle", "boat", ("boat", "ship", "sailboat", "canoe", "kayak", "yacht", "ferry")),
    (10, "traffic light", "outdoor", "traffic light", ("traffic light", "stop light", "stoplight", "traffic signal")),
    (11, "fire hydrant", "outdoor", "fire hydrant", ("fire hydrant", "hydrant")),
    (13, "stop sign", "outdoor", "stop sign", ("stop sign",)),
    (14, "parking meter", "outdoor", "parking meter", ("parking meter",)),
    (15, "bench", "outdoor", "bench", ("bench",)),
    (16, "bird", "animal", "bird", ("bird", "pigeon", "seagull", "gull", "duck", "goose", "parrot", "swan")),
    (17, "cat", "animal", "cat", ("cat", "kitten", "kitty")),
    (18, "dog", "animal", "dog", ("dog", "puppy", "pup")),
    (19, "horse", "animal", "horse", ("horse", "pony")),
    (20, "sheep", "animal", "sheep", ("sheep", "lamb")),
    (21, "cow", "animal", "cow", ("cow", "bull", "calf", "cattle")),
    (22, "elephant", "animal", "elephant", ("elephant",)),
    (23, "bear", "animal", "bear", ("bear", "polar bear", "grizzly bear")),
    (24, "zebra", "animal", "zebra", ("zebra",)),
    (25, "giraffe", "animal", "giraffe", ("giraffe",)),
    (27, "backpack", "accessory", "backpack", ("backpack", "back pack", "rucksack")),
    (28, "umbrella", "accessory", "umbrella", ("umbrella", "parasol")),
    (31, "handbag", "accessory", "handbag", ("handbag", "purse", "hand bag")),
    (32, "tie", "accessory", "tie", ("tie", "necktie")),
    (33, "suitcase", "accessory", "suitcase", ("suitcase", "luggage")),
    (34, "frisbee", "sports", "frisbee", ("frisbee", "frisbe")),
    (35, "skis", "sports", "skis", ("skis", "ski")),
    (36, "snowboard", "sports", "snowboard", ("snowboard",)),
    (37, "sports ball", "sports", "ball", ("ball", "sports ball", "soccer ball", "tennis ball", "baseball", "football", "basketball", "volleyball")),
    (38, "kite", "sports", "kite", ("kite",)),
    (39, "baseball bat", "sports", "bat", ("baseball bat", "bat")),
    (40, "baseball glove", "sports", "glove", ("baseball glove", "glove", "mitt")),
    (41, "skateboard", "sports", "skateboard", ("skateboard", "skate board")),
    (42, "surfboard", "sports", "surfboard", ("surfboard", "surf board")),
    (43, "tennis racket", "sports", "racket", ("tennis racket", "racket", "racquet", "tennis racquet")),
    (44, "bottle", "kitchen", "bottle", ("bottle",)),
    (46, "wine glass", "kitchen", "glass", ("wine glass", "glass")),
    (47, "cup", "kitchen", "cup", ("cup", "mug", "coffee cup")),
    (48, "fork", "kitchen", "fork", ("fork",)),
    (49, "knife", "kitchen", "knife", ("knife",)),
    (50, "spoon", "kitchen", "spoon", ("spoon",)),
    (51, "bowl", "kitchen", "bowl", ("bowl",)),
    (52, "banana", "food", "banana", ("banana",)),
    (53, "apple", "food", "apple", ("apple",)),
    (54, "sandwich", "food", "sandwich", ("sandwich", "sub", "burger", "hamburger")),
    (55, "orange", "food", "orange", ("orange",)),
    (56, "broccoli", "food", "broccoli", ("broccoli",)),
    (57, "carrot", "food", "carrot", ("carrot",)),
    (58, "hot dog", "food", "hot dog", ("hot dog", "hotdog")),
    (59, "pizza", "food", "pizza", ("pizza",)),
    (60, "donut", "food", "donut", ("donut", "doughnut")),
    (61, "cake", "food", "cake", ("cake", "cupcake")),
    (62, "chair", "furniture", "chair", ("chair", "stool")),
    (63, "couch", "furniture", "couch", ("couch", "sofa")),
    (64, "potted plant", "furniture", "plant", ("potted plant", "plant", "houseplant")),
    (65, "bed", "furniture", "bed", ("bed",)),
    (67, "dining table", "furniture", "table", ("dining table", "table", "desk")),
    (70, "toilet", "furniture", "toilet", ("toilet",)),
    (72, "tv", "electronic", "tv", ("tv", "television", "tv set")),
    (73, "laptop", "electronic", "laptop", ("laptop", "computer", "notebook computer")),
    (74, "mouse", "electronic", "mouse", ("mouse", "computer mouse")),
    (75, "remote", "electronic", "remote", ("remote", "remote control", "controller")),
    (76, "keyboard", "electronic", "keyboard", ("keyboard",)),
    (77, "cell phone", "electronic", "phone", ("cell phone", "phone", "cellphone", "smartphone", "mobile phone")),
    (78, "microwave", "appliance", "microwave", ("microwave",)),
    (79, "oven", "appliance", "oven", ("oven", "stove")),
    (80, "toaster", "appliance", "toaster", ("toaster",)),
    (81, "sink", "appliance", "sink", ("sink",)),
    (82, "refrigerator", "appliance", "refrigerator", ("refrigerator", "fridge")),
    (84, "book", "indoor", "book", ("book",)),
    (85, "clock", "indoor", "clock", ("clock",)),
    (86, "vase", "indoor", "vase", ("vase",)),
    (87, "scissors", "indoor", "scissors", ("scissors",)),
    (88, "teddy bear", "indoor", "teddy bear", ("teddy bear", "teddy", "stuffed bear")),
    (89, "hair drier", "indoor", "hair drier", ("hair drier", "hair dryer", "blow dryer", "drier")),
    (90, "toothbrush", "indoor", "toothbrush", ("toothbrush", "tooth brush")),
)

#: words that do not change between singular and plural, or exist only in one number
INVARIANT = frozenset(("sheep", "skis", "scissors", "broccoli", "cattle", "people", "luggage", "tv"))
PLURAL_ONLY = frozenset(("skis", "scissors", "cattle", "people"))


@functools.lru_cache(maxsize=None)
def _plural(word: str) -> str:
    if word in INVARIANT:
        return word
    from foilforge.foilers.lang.inflection import import_inflect

    words = word.split()
    return " ".join(words[:-1] + [import_inflect().engine().plural_noun(words[-1])])


def plural_form(word: str) -> str:
    """The plural of a (possibly multi-word) category word: "hot dog" -> "hot dogs", "sheep" -> "sheep"."""
    return _plural(word)


@functools.lru_cache(maxsize=1)
def mention_forms() -> dict[tuple[str, ...], tuple[int, str]]:
    """{token tuple of a surface form: (category id, "sg" | "pl")}, singular and plural forms of every synonym."""
    forms: dict[tuple[str, ...], tuple[int, str]] = {}
    for cat_id, _name, _super, _word, synonyms in COCO_CATEGORIES:
        for synonym in synonyms:
            number = "pl" if synonym in PLURAL_ONLY else "sg"
            forms.setdefault(tuple(synonym.split()), (cat_id, number))
            if synonym not in INVARIANT:
                forms.setdefault(tuple(plural_form(synonym).split()), (cat_id, "pl"))
    return forms


@functools.lru_cache(maxsize=1)
def by_id() -> dict[int, tuple[int, str, str, str, tuple[str, ...]]]:
    return {row[0]: row for row in COCO_CATEGORIES}
