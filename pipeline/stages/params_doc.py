"""Write docs/params.md, the reference of every params.yaml key, from the schema (foilforge/schema.py).

    foilforge params-doc                    # rewrite docs/params.md
    foilforge params-doc --output -         # print it
"""

from __future__ import annotations

from foilforge.params_doc import DEFAULT_PATH, render, write


def add_arguments(parser) -> None:
    parser.add_argument("--output", default=DEFAULT_PATH, help=f"where to write it ('-': stdout; default: {DEFAULT_PATH})")


def main(args) -> int:
    if args.output == "-":
        print(render(), end="")
    else:
        write(args.output)
    return 0
