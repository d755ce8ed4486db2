"""The sentence-list derivation and the shipped list."""

from __future__ import annotations

import io
import tarfile

from wavern.training.corpus import default_sentences_path, read_sentences
from wavern.training.corpus.make_sentences import derive_sentences, keep_sentence, read_addresses, split_sentences


def test_split_respects_abbreviations_and_initials():
    text = 'Mr. Smith went to Washington, D.C. on Monday. He met Gen. J. Doe. "Why?" he asked. We left!'
    assert split_sentences(text) == [
        "Mr. Smith went to Washington, D.C. on Monday.",
        "He met Gen. J. Doe.",
        '"Why?" he asked.',
        "We left!",
    ]


def test_filter():
    assert keep_sentence("We have kept the peace for many years.")
    assert not keep_sentence("Too short.")
    assert not keep_sentence("This one has no final punctuation at all")
    assert not keep_sentence("Believe in America.Thank you, and God bless you.")  # run-together
    assert not keep_sentence("Receipts 1,234,567 and 2,345,678 and 3,456,789 were 12,345.")  # a table
    assert not keep_sentence('He said "yes and then left the room.')  # unbalanced quote
    assert not keep_sentence("The caf\u00e9 was closed for the whole of the winter.")  # not plain ASCII
    assert not keep_sentence(" ".join(["word"] * 31) + ".")


def test_derive_from_a_tarball(tmp_path):
    docs = {
        "package/data/1790_a.txt": "Fellow citizens, we meet again. (Applause.) We meet again\u2014gladly. Mr. Adams spoke.",
        "package/data/1791_b.txt": "We meet again, gladly. The harvest was good this year.",
        "package/data/1791_b.json": '{"ignored": true}',
    }
    tgz = tmp_path / "sotu.tgz"
    with tarfile.open(tgz, "w:gz") as tar:
        for name, text in docs.items():
            data = text.encode("utf-8")
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    names = [n for n, _ in read_addresses(tgz)]
    assert names == ["1790_a.txt", "1791_b.txt"]
    out = derive_sentences(read_addresses(tgz), count=10, seed=0)
    # "We meet again, gladly." folds to the same key as "We meet again - gladly.": a duplicate
    assert sorted(out) == sorted([
        "Fellow citizens, we meet again.", "We meet again - gladly.", "Mr. Adams spoke.",
        "The harvest was good this year.",
    ])
    assert derive_sentences(read_addresses(tgz), count=10, seed=0) == out


def test_shipped_list():
    path = default_sentences_path()
    assert path.stat().st_size < 1_000_000
    s = read_sentences(path)
    assert len(s) == 5000 and len(set(s)) == 5000
    assert all(keep_sentence(x) for x in s)
    assert (path.parent / "README.md").read_text(encoding="utf-8").count("CC0") >= 1
