"""Run another git revision of wavern beside this checkout (the ``--against REV`` of the benches).

``export_checkout(rev, dest)`` writes the package folders of ``rev`` under ``dest``, laid out as
the installed package (``wavern/engine``, ...), and returns the folder to put first on
``PYTHONPATH``; ``resolve_commit(rev)`` says whether this clone has that commit at all. Run the subprocess from a folder outside the repository: with ``python -c`` or
``-m`` the current folder comes first on ``sys.path`` and would shadow the export. Folders left
out of ``folders`` come from this checkout (the editable install's finder runs last).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE_FOLDERS = ("wavern", "engine", "vocoder", "conditioning", "training", "app", "assets")
#: The folders a vocoder benchmark needs from another revision (the rest come from this checkout).
ENGINE_FOLDERS = ("wavern", "engine", "vocoder", "conditioning")


def resolve_commit(rev: str) -> str | None:
    """The full hash of commit ``rev`` in this clone, or None where it has none (a shallow clone
    lacks old ones)."""
    res = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"],
                         capture_output=True, text=True)
    return res.stdout.strip() if res.returncode == 0 else None


def export_checkout(rev: str, dest: Path, *, folders: tuple[str, ...] = PACKAGE_FOLDERS) -> Path:
    if folders[0] != "wavern":
        raise ValueError("folders must start with the root package folder 'wavern'")
    src = dest / "src"
    src.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, *folders], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(src)], input=archive.stdout, check=True)
    pkg = dest / "pkg" / "wavern"
    pkg.mkdir(parents=True)
    for f in (src / "wavern").iterdir():
        (pkg / f.name).symlink_to(f)
    for name in folders[1:]:
        (pkg / name).symlink_to(src / name)
    return dest / "pkg"
