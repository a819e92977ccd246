"""Make Debian's WordNet 3.0 (package wordnet-base) readable by NLTK, offline.

NLTK refuses symlinks that leave its corpus root, so the database files are
copied into <target>/corpora/wordnet/, and the `lexnames` file NLTK needs is
derived from the lexnames(5WN) man page that wordnet-base ships.
Usage: python scripts/setup_wordnet.py .venv/nltk_data
"""

import gzip
import re
import shutil
import sys
from pathlib import Path

SOURCE = Path("/usr/share/wordnet")
MANPAGE = Path("/usr/share/man/man5/lexnames.5WN.gz")
CATEGORY = {"noun": 1, "verb": 2, "adj": 3, "adv": 4}


def main(target: str) -> int:
    if not (SOURCE / "data.noun").exists():
        print(f"setup_wordnet: {SOURCE}/data.noun not found; install the Debian package wordnet-base", file=sys.stderr)
        return 1
    out = Path(target) / "corpora" / "wordnet"
    out.mkdir(parents=True, exist_ok=True)
    for f in SOURCE.iterdir():
        if f.is_file():
            shutil.copyfile(f, out / f.name)
    lines = []
    if MANPAGE.exists():
        for line in gzip.open(MANPAGE, "rt", encoding="utf-8", errors="replace"):
            m = re.match(r"^(\d\d)\t(\w+)\.(\w+)\s*\t", line)
            if m:
                lines.append(f"{m.group(1)}\t{m.group(2)}.{m.group(3)}\t{CATEGORY[m.group(2)]}")
    if len(lines) != 45:
        print(f"setup_wordnet: expected 45 lexicographer files in {MANPAGE}, found {len(lines)}", file=sys.stderr)
        return 1
    (out / "lexnames").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"setup_wordnet: WordNet 3.0 copied to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else ".venv/nltk_data"))
