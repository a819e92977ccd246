"""Expose Debian's Link Grammar bindings (python3-link-grammar) to the project's venv.

The bindings are a compiled module for the system Python 3; adding the whole
dist-packages to the venv would shadow pinned packages, so only the
`linkgrammar` package is made visible, through a .pth file naming a folder
that holds a link to it. Skipped (with a note) when the venv's Python version
differs from the module's.
"""

import sys
import sysconfig
from pathlib import Path

SYSTEM = Path("/usr/lib/python3/dist-packages/linkgrammar")


def main() -> int:
    if not SYSTEM.exists():
        print("link_linkgrammar: python3-link-grammar is not installed; the Link Grammar alternative is unavailable")
        return 0
    tag = f"cpython-{sys.version_info.major}{sys.version_info.minor}"
    if not any(tag in p.name for p in SYSTEM.glob("_clinkgrammar*.so")):
        print(f"link_linkgrammar: Debian's module is not built for {tag}; the Link Grammar alternative is unavailable")
        return 0
    site = Path(sysconfig.get_paths()["purelib"])
    shim = site.parent / "foilforge-linkgrammar"
    shim.mkdir(exist_ok=True)
    link = shim / "linkgrammar"
    if not link.exists():
        link.symlink_to(SYSTEM)
    (site / "foilforge-linkgrammar.pth").write_text(str(shim) + "\n", encoding="utf-8")
    print(f"link_linkgrammar: linked {SYSTEM} into the venv")
    return 0


if __name__ == "__main__":
    sys.exit(main())
