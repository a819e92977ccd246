"""Every command in README.md and docs/*.md is checked: a documented command with a wrong flag or a name
that does not exist fails here.

Commands are the lines of ```bash, ```sh and ```console blocks (console: the lines after `$ `). Each is
checked by what it runs:

* `foilforge ...`: parsed by the console script's own argparse parser (pipeline.stages.cli.build_parser),
  nothing run; the cheap ones (`--help`, `check-params`, `profile`) are also run;
* `make ...`: every target is a Makefile target and every VAR=value a variable the Makefile reads;
* `dvc ...`: parsed by DVC's own parser; `dvc repro STAGE` names a stage of dvc.yaml;
* `python -m MODULE`: the repository's module file exists (and a benchmark's `--flags` are its own), or the
  third-party module is importable; `python -c CODE` compiles;
* `pip install`: `.[extras]` are extras of pyproject.toml, `-r FILE` exists;
* the evaluation harnesses' own programs (docs/harnesses.md): the export folders they read exist as
  export formats in params.yaml.

A program none of these rules knows fails the test, so a new kind of command gets its check here.

Commands quoted inline in the prose (`foilforge refilter`, `make benchmarks`, `dvc metrics show`) are often
partial, so they get the name checks only: the subcommand exists and every `--flag` is one of its options;
the same make / dvc / python -m / pip checks as above. A span with a placeholder (`foilforge STAGE --help`,
`python -m benchmarks.NAME`) is skipped.
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
import tomllib
from pathlib import Path

import pytest
import yaml

from foilforge.pipeline.stages.cli import COMMANDS, build_parser, main

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(bash|sh|console)[ \t]*\n(.*?)^```", flags=re.MULTILINE | re.DOTALL)
SEPARATORS = {"&&", "||", ";", "|"}
# packages of this repository: `python -m` on one of them must name a file that exists
OWN_PACKAGES = {"foilforge", "pipeline", "foilers", "filters", "benchmarks", "scripts"}
# programs of the evaluation harnesses (docs/harnesses.md): installed by the user, not by make setup
HARNESS_PROGRAMS = {"lmms-eval", "cp", "clip_benchmark"}
# scripts of other checkouts the docs tell the user to run there
OTHER_CHECKOUTS = {"run.py": "VLMEvalKit's entry script, run from a VLMEvalKit checkout",
                   "main_eval.py": "SugarCrepe's evaluation script, run from a sugar-crepe checkout"}
# third-party modules the docs tell a user with a model hub to run; the offline setup does not install them
HUB_ONLY_MODULES = {"coreferee"}
INLINE = re.compile(r"(?<![`\w])`((?:foilforge|make|dvc|python3? -m|pip install) [^`\n]+)`(?![`\w])")
PLACEHOLDER = re.compile(r"(?:^|[./])[A-Z][A-Z_]*(?:$|[./])")  # STAGE, FILE, I, benchmarks.NAME
# documented commands cheap enough to run for real (in-process, from the repository root)
RUN_FOR_REAL = {("--help",), ("check-params",), ("profile", "paper"), ("check-params", "--profile", "paper")}


def shell_lines(block: str, console: bool) -> list[str]:
    """One string per command line: continuation lines (a trailing backslash, an open quote) joined."""
    lines, pending = [], ""
    for raw in block.splitlines():
        if console and not pending:
            if not raw.startswith("$ "):
                continue  # the command's output
            raw = raw[2:]
        pending = f"{pending}\n{raw}" if pending else raw
        if pending.endswith("\\"):
            pending = pending[:-1]
            continue
        try:
            shlex.split(pending, comments=True)
        except ValueError:  # an open quote: the command goes on
            continue
        lines.append(pending)
        pending = ""
    if pending:
        lines.append(pending)
    return lines


def commands(text: str) -> list[list[str]]:
    """Every command of the document's shell blocks as an argv (`a && b` gives two; VAR=value prefixes dropped)."""
    found = []
    for language, block in FENCE.findall(text):
        for line in shell_lines(block, console=language == "console"):
            lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|")
            lexer.whitespace_split = True
            argv = []
            for token in [*lexer, ";"]:
                if token in SEPARATORS:
                    while argv and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", argv[0]):
                        argv.pop(0)
                    if argv:
                        found.append(argv)
                    argv = []
                else:
                    argv.append(token)
    return found


def inline_commands(text: str) -> list[list[str]]:
    """Commands quoted in the prose, outside code blocks, that hold no placeholder."""
    prose = re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)
    found = []
    for span in INLINE.findall(prose):
        argv = shlex.split(span)
        values = [re.sub(r"^[A-Z_]+=", "", arg) for arg in argv]  # make's VAR=value is no placeholder
        if not any(PLACEHOLDER.search(value) for value in values):
            found.append(argv)
    return found


def makefile() -> tuple[set[str], set[str]]:
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    targets = set(re.findall(r"^([A-Za-z0-9_.-]+)\s*:(?!=)", text, flags=re.MULTILINE))
    variables = set(re.findall(r"^([A-Z_]+)\s*[?:]?=", text, flags=re.MULTILINE))
    return targets, variables


def dvc_stages() -> set[str]:
    return set((yaml.safe_load((ROOT / "dvc.yaml").read_text(encoding="utf-8")) or {}).get("stages", {}))


def export_formats() -> set[str]:
    from foilforge.params import load_params

    return set(load_params(ROOT / "params.yaml").export.formats)


def parse_exit(parser, argv: list[str]) -> str | None:
    """None when argparse accepts argv, else its error message (nothing is run)."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            parser.parse_args(argv)
    except SystemExit as exit_:
        if exit_.code not in (0, None):
            return err.getvalue().strip().splitlines()[-1] if err.getvalue().strip() else f"exit {exit_.code}"
    return None


def check_foilforge(argv: list[str]) -> list[str]:
    message = parse_exit(build_parser(), argv[1:])
    return [message] if message else []


def subcommand_options(parser) -> dict[str, set[str]]:
    """Each subcommand -> every option string of it and of its own subcommands (annotate's actions)."""
    import argparse

    def options(p) -> set[str]:
        found = set(p._option_string_actions)
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                for child in action.choices.values():
                    found |= options(child)
        return found

    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {name: options(child) for name, child in action.choices.items()}


def check_foilforge_names(argv: list[str]) -> list[str]:
    """A partial command: the subcommand exists and its flags are its own; required arguments may be left out."""
    parser = build_parser()
    if len(argv) == 1 or argv[1].startswith("-"):
        return [f"foilforge has no option {arg}" for arg in argv[1:] if arg.startswith("-")
                and arg not in parser._option_string_actions]
    known = subcommand_options(parser)
    if argv[1] not in known:
        return [f"no foilforge subcommand {argv[1]!r}"]
    return [f"foilforge {argv[1]} has no option {arg}" for arg in argv[2:]
            if arg.startswith("--") and arg.split("=", 1)[0] not in known[argv[1]]]


def check_make(argv: list[str]) -> list[str]:
    targets, variables = makefile()
    found = []
    for arg in argv[1:]:
        if "=" in arg:
            if arg.split("=", 1)[0] not in variables:
                found.append(f"the Makefile reads no variable {arg.split('=', 1)[0]}")
        elif arg not in targets:
            found.append(f"no Makefile target {arg!r}")
    return found


def check_dvc(argv: list[str]) -> list[str]:
    import logging

    from dvc.cli import DvcParserError
    from dvc.cli.parser import get_main_parser

    class Messages(logging.Handler):  # DVC's parser logs its error and raises DvcParserError
        def __init__(self):
            super().__init__(logging.ERROR)
            self.seen = []

        def emit(self, record):
            self.seen.append(record.getMessage())

    messages, logger = Messages(), logging.getLogger("dvc")
    # ours alone: a DVC command run earlier in the same process leaves handlers on streams since closed
    saved = logger.handlers[:], logger.propagate
    logger.handlers, logger.propagate = [messages], False
    try:
        message = parse_exit(get_main_parser(), argv[1:])
    except DvcParserError:
        message = "; ".join(messages.seen) or "dvc's parser rejects the arguments"
    finally:
        logger.handlers, logger.propagate = saved
    if message:
        return [message]
    if argv[1:2] == ["repro"]:
        stages = dvc_stages()
        return [f"no dvc.yaml stage {target!r}" for target in argv[2:]
                if not target.startswith("-") and target.split("@", 1)[0] not in stages]
    return []


def module_file(module: str) -> Path | None:
    base = ROOT.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__main__.py"):
        if candidate.exists():
            return candidate
    return None


def check_python(argv: list[str]) -> list[str]:
    if argv[1:2] == ["-c"]:
        try:
            compile(argv[2], "<python -c>", "exec")
        except SyntaxError as err:
            return [f"python -c does not compile: {err}"]
        return []
    if argv[1:2] == ["-m"]:
        module = argv[2]
        if module.split(".")[0] in OWN_PACKAGES:
            path = module_file(module)
            if path is None:
                return [f"no module file for {module}"]
            source = path.read_text(encoding="utf-8")
            return [f"{module} defines no option {arg}" for arg in argv[3:]
                    if arg.startswith("--") and f'"{arg.split("=", 1)[0]}"' not in source]
        import importlib.util

        top = module.split(".")[0]
        return [] if top in HUB_ONLY_MODULES or importlib.util.find_spec(top) else [f"{module} is not installed"]
    if argv[1] in OTHER_CHECKOUTS:
        return []
    return [] if (ROOT / argv[1]).exists() else [f"no script {argv[1]}"]


def check_pip(argv: list[str]) -> list[str]:
    if argv[1:2] != ["install"]:
        return [f"pip {argv[1:2]}: only `pip install` is checked"]
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = set(project.get("optional-dependencies", {}))
    found, args = [], argv[2:]
    for position, arg in enumerate(args):
        if arg == "-r":
            if not (ROOT / args[position + 1]).exists():
                found.append(f"no requirements file {args[position + 1]}")
        elif match := re.fullmatch(r"\.(?:\[(.*)\])?", arg):
            found += [f"pyproject.toml has no extra {extra!r}" for extra in (match.group(1) or "").split(",")
                      if extra and extra not in extras]
    return found


def check_harness(argv: list[str]) -> list[str]:
    formats = export_formats()
    found = []
    for arg in argv[1:]:
        for path in re.findall(r"data/benchmark/([A-Za-z0-9_-]+)(?:/|$)", arg):  # a folder, not a file
            if path not in formats:
                found.append(f"data/benchmark/{path}/ is no export format of params.yaml")
    return found


CHECKS = {"foilforge": check_foilforge, "make": check_make, "dvc": check_dvc, "python": check_python,
          "python3": check_python, "pip": check_pip, **{name: check_harness for name in HARNESS_PROGRAMS}}


def problems(name: str, text: str) -> list[str]:
    found = []
    quoted = [(argv, CHECKS) for argv in commands(text)]
    quoted += [(argv, {**CHECKS, "foilforge": check_foilforge_names}) for argv in inline_commands(text)]
    for argv, checks in quoted:
        check = checks.get(Path(argv[0]).name)
        if check is None:
            found.append(f"{name}: {shlex.join(argv)}: no check knows the program {argv[0]!r}")
            continue
        found += [f"{name}: {shlex.join(argv)}: {problem}" for problem in check(argv)]
    return found


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: path.relative_to(ROOT).as_posix())
def test_every_documented_command_names_what_exists(document):
    assert problems(document.name, document.read_text(encoding="utf-8")) == []


def test_the_documents_hold_the_commands_they_promise():
    documented = {document.name: commands(document.read_text(encoding="utf-8")) for document in DOCUMENTS}
    assert documented["README.md"][:2] == [["make", "repro"], ["make", "test"]]  # the README's first block
    every = [argv for argvs in documented.values() for argv in argvs]
    assert {argv[1] for argv in every if argv[0] == "foilforge"} >= {"check-params", "evaluate", "refilter", "annotate"}
    assert {"make", "dvc", "python", "pip", "lmms-eval"} <= {argv[0] for argv in every}


BAD = """```bash
foilforge foil relations --input data/ingested/coco.jsonl --output x.jsonl --metrcs m.json  # a misspelt flag
foilforge bias                                                            # a missing argument
foilforge frobnicate
make repro && make reproduce
make repro ENGIN=ray
dvc repro select@relations nonexistent_stage
dvc metrics shwo
python -m benchmarks.bench_nonexistent
python -m benchmarks.bench_refinement_scale --no-such-flag
python -c 'print('
pip install ".[offline,nonexistent]"
lmms-eval --include_path data/benchmark/lmms_evl --tasks foilforge_relations
ffmpeg -i x.mp4
```

Prose quotes `foilforge refiltr` and `foilforge refilter --lik relations`, `make benchmark`,
`python -m benchmarks.bench_nothing`, but not `foilforge STAGE --help`.
"""


def test_a_planted_bad_command_fails():
    found = problems("planted.md", BAD)
    expected = ["unrecognized arguments: --metrcs", "the following arguments are required", "invalid choice: 'frobnicate'",
                "no Makefile target 'reproduce'", "no variable ENGIN", "no dvc.yaml stage 'nonexistent_stage'",
                "invalid choice: 'shwo'", "no module file for benchmarks.bench_nonexistent",
                "defines no option --no-such-flag", "python -c does not compile", "no extra 'nonexistent'",
                "data/benchmark/lmms_evl/ is no export format", "no check knows the program 'ffmpeg'",
                "no foilforge subcommand 'refiltr'", "foilforge refilter has no option --lik",
                "no Makefile target 'benchmark'", "no module file for benchmarks.bench_nothing"]
    for fragment in expected:
        assert sum(fragment in problem for problem in found) == 1, (fragment, found)
    assert len(found) == len(expected), found


def test_good_commands_pass_the_same_checks():
    good = """```console
$ foilforge foil relations --input data/ingested/coco.jsonl --output x.jsonl
some output line
$ make repro PROFILE=paper
```

and in prose `foilforge refilter`, `foilforge annotate dump --groups`, `dvc metrics show`.
"""
    assert commands(good) == [["foilforge", "foil", "relations", "--input", "data/ingested/coco.jsonl", "--output",
                               "x.jsonl"], ["make", "repro", "PROFILE=paper"]]
    assert inline_commands(good) == [["foilforge", "refilter"], ["foilforge", "annotate", "dump", "--groups"],
                                     ["dvc", "metrics", "show"]]
    assert problems("good.md", good) == []


def documented_cheap_commands() -> list[tuple[str, ...]]:
    every = {tuple(argv[1:]) for document in DOCUMENTS for argv in commands(document.read_text(encoding="utf-8"))
             if argv[0] == "foilforge"}
    return sorted(every & RUN_FOR_REAL | {("--help",)})


@pytest.mark.parametrize("argv", documented_cheap_commands(), ids=" ".join)
def test_cheap_documented_commands_run(argv, monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    try:
        rc = main(list(argv))
    except SystemExit as exit_:  # --help exits through argparse
        rc = exit_.code
    out = capsys.readouterr().out
    assert rc == 0
    if argv == ("--help",):
        assert all(name in out for name in COMMANDS)
    if argv[0] == "profile":  # what `make repro PROFILE=paper` hands to `dvc exp run`
        overrides = shlex.split(out)
        assert overrides[0] == "-S" and check_dvc(["dvc", "exp", "run", *overrides]) == []


@pytest.mark.parametrize("document", [*DOCUMENTS, ROOT / "CHANGELOG.md"], ids=lambda path: path.relative_to(ROOT).as_posix())
def test_every_relative_link_resolves(document):
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", document.read_text(encoding="utf-8"))
    assert [link for link in links if "://" not in link and not (document.parent / link).exists()] == []
