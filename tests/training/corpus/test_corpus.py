"""build_corpus / load_corpus: determinism, token equality with analyze, validation."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from wavern.conditioning.frontend import analyze
from wavern.dsp import DEFAULT_MEL, int16_to_float, log_mel
from wavern.errors import CorpusError, ParameterError
from wavern.training.corpus import (
    ALL_VOICES,
    build_corpus,
    is_held_out,
    load_corpus,
    plan_utterances,
    read_sentences,
)

N = 10


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, Path, dict]:
    root = tmp_path_factory.mktemp("corpus")
    a, b = root / "a", root / "b"
    # three shards (fresh worker processes) over two jobs, then over one
    info = build_corpus(a, utterances=N, seed=3, jobs=2, progress=False, shard_size=4)
    build_corpus(b, utterances=N, seed=3, jobs=1, progress=False, shard_size=4)
    return a, b, info


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_two_builds_are_byte_identical(built):
    a, b, _ = built
    fa, fb = _files(a), _files(b)
    assert len(fa) == 2 * N + 2  # wavs, mels, metadata.jsonl, corpus.json
    assert fa.keys() == fb.keys()
    for name in fa:
        assert fa[name] == fb[name], name


def test_records_are_consistent(built):
    a, _, info = built
    c = load_corpus(a)
    assert len(c) == N == info["utterances"]
    assert c.symbols == info["symbols"]
    for r in c:
        audio = r.audio()
        assert audio.dtype == np.int16 and audio.size == r.n_samples
        assert r.durations is not None and int(r.durations.sum()) == r.n_samples
        assert (r.durations >= 0).all() and len(r.durations) == len(r.phonemes)
        assert r.voice in ALL_VOICES and r.phonemes[0] == "<bos>" and r.phonemes[-1] == "<eos>"
        # the stored mel is the one log-mel of the stored audio
        np.testing.assert_array_equal(r.mel(), log_mel(int16_to_float(audio), DEFAULT_MEL))
        spans = r.word_spans
        assert spans and all(0 <= s["start"] < s["end"] <= len(r.text) for s in spans)
        assert spans[-1]["sample_end"] <= r.n_samples


def test_corpus_tokens_equal_analyze(built):
    """The requirement: for the same text and espeak voice, analyze gives the stored tokens,
    although the corpus rendered with other rate, pitch and range."""
    a, _, _ = built
    c = load_corpus(a)
    assert any((r.rate, r.pitch, r.pitch_range) != (175, 50, 50) for r in c)
    for r in c:
        assert analyze(r.text, voice=r.voice).symbols == list(r.phonemes)


def test_plan_is_seeded():
    s = read_sentences()
    p1 = plan_utterances(s, utterances=50, seed=1, voices=ALL_VOICES, vary_prosody=True)
    assert p1 == plan_utterances(s, utterances=50, seed=1, voices=ALL_VOICES, vary_prosody=True)
    p2 = plan_utterances(s, utterances=50, seed=2, voices=ALL_VOICES, vary_prosody=True)
    assert [x.text for x in p1] != [x.text for x in p2]
    assert len({x.voice for x in p1}) > 20
    single = plan_utterances(s, utterances=5, seed=1, voices=["en-us"], vary_prosody=False)
    assert {(x.voice, x.rate, x.pitch, x.pitch_range) for x in single} == {("en-us", 175, 50, 50)}
    short = plan_utterances(s[:3], utterances=7, seed=0, voices=["en-us"], vary_prosody=True)
    assert len(short) == 7 and {x.text for x in short} == set(s[:3])  # cycles when short of text
    # what a user may ask of a prosody voice is exactly what the plan draws from
    from wavern.conditioning.config import PROSODY_LIMITS
    from wavern.training.corpus.build import PITCH_RANGE, PITCH_RANGE_RANGE, RATE_RANGE

    assert PROSODY_LIMITS == (RATE_RANGE, PITCH_RANGE, PITCH_RANGE_RANGE)
    drawn = plan_utterances(s, utterances=400, seed=3, voices=ALL_VOICES, vary_prosody=True)
    for k, field in enumerate(("rate", "pitch", "pitch_range")):
        values = [getattr(x, field) for x in drawn]
        assert PROSODY_LIMITS[k][0] <= min(values) and max(values) <= PROSODY_LIMITS[k][1]


def test_held_out_rule():
    s = read_sentences()
    frac = np.mean([is_held_out(t) for t in s])
    assert 0.02 < frac < 0.04
    assert is_held_out(s[0]) == is_held_out("  " + s[0].replace(" ", "  ") + " ")


def test_refuses_to_overwrite_and_bad_arguments(built, tmp_path):
    a, _, _ = built
    with pytest.raises(CorpusError, match="overwrite"):
        build_corpus(a, utterances=1, progress=False)
    with pytest.raises(ParameterError):
        build_corpus(tmp_path / "x", utterances=0, progress=False)
    with pytest.raises(ParameterError):
        build_corpus(tmp_path / "y", utterances=1, voices=["xx-nope+m1"], progress=False)
    with pytest.raises(ParameterError):
        build_corpus(tmp_path / "z", utterances=1, voices=["en-us"], single_voice="en-us", progress=False)


def test_an_overwrite_with_bad_arguments_keeps_the_old_corpus(built, tmp_path):
    import shutil

    a, _, _ = built
    c = tmp_path / "c"
    shutil.copytree(a, c)
    before = _files(c)
    with pytest.raises(ParameterError):
        build_corpus(c, utterances=2, voices=["xx-nope+m1"], overwrite=True, progress=False)
    assert _files(c) == before


def test_a_folder_that_is_not_a_wavern_corpus_is_left_alone(built, tmp_path):
    lj = tmp_path / "LJSpeech"  # another dataset's layout: its recordings must survive
    (lj / "wavs").mkdir(parents=True)
    (lj / "wavs" / "LJ001-0001.wav").write_bytes(b"RIFF recordings")
    (lj / "metadata.csv").write_text("LJ001-0001|Printing|Printing\n")
    before = _files(lj)
    for overwrite in (False, True):
        with pytest.raises(CorpusError, match=r"not part of a wavern corpus \(metadata.csv, wavs/LJ001-0001.wav\)"):
            build_corpus(lj, utterances=1, overwrite=overwrite, progress=False)
    assert _files(lj) == before
    mixed = tmp_path / "mixed"  # a corpus with a foreign file among its wavs
    shutil.copytree(built[0], mixed)
    (mixed / "wavs" / "mine.wav").write_bytes(b"x")
    with pytest.raises(CorpusError, match="wavs/mine.wav"):
        build_corpus(mixed, utterances=1, overwrite=True, progress=False)
    (tmp_path / "file").write_text("x")
    with pytest.raises(CorpusError, match="is a file"):
        build_corpus(tmp_path / "file", utterances=1, progress=False)
    with pytest.raises(ParameterError, match="seed must be a non-negative integer"):
        build_corpus(tmp_path / "s", utterances=1, seed=-1, progress=False)


def test_a_sentence_that_cannot_be_spoken_is_refused_before_the_old_corpus_goes(built, tmp_path):
    c = tmp_path / "c"
    shutil.copytree(built[0], c)
    before = _files(c)
    sentences = tmp_path / "s.txt"
    sentences.write_text("A fine sentence.\n***\n")
    with pytest.raises(CorpusError, match=r"s.txt: sentence 2 \('\*\*\*'\) cannot be spoken"):
        build_corpus(c, utterances=2, sentences_path=sentences, overwrite=True, progress=False)
    assert _files(c) == before


@pytest.mark.parametrize(("voice", "message"), [
    ("en-us+zzz", "no voice variant 'zzz'"),  # espeak would speak plain en-us under this name
    ("en-US+F3", "no voice variant 'F3'"),
    ("en-us+f3+m1", "no voice variant 'f3\\+m1'"),
    ("fr+m1", "the corpus is English"),  # its phonemes are <unk> to the symbol table
])
def test_unknown_variants_and_other_languages_are_refused(tmp_path, voice, message):
    with pytest.raises(ParameterError, match=message):
        build_corpus(tmp_path / "c", utterances=1, voices=[voice], progress=False)
    assert not (tmp_path / "c").exists()


def test_metadata_is_written_last_so_its_presence_means_a_complete_corpus(tmp_path, monkeypatch):
    """A build killed after the audio but before corpus.json leaves no metadata.jsonl behind."""
    import json as json_mod

    from wavern.training.corpus import build as build_mod

    real_dumps = json_mod.dumps

    def die_at_corpus_json(obj, *args, **kwargs):
        if isinstance(obj, dict) and obj.get("format") == build_mod.CORPUS_FORMAT:
            raise KeyboardInterrupt  # the kill, just before corpus.json is written
        return real_dumps(obj, *args, **kwargs)

    monkeypatch.setattr(build_mod.json, "dumps", die_at_corpus_json)
    with pytest.raises(KeyboardInterrupt):
        build_corpus(tmp_path / "c", utterances=2, seed=0, jobs=1, progress=False)
    assert not (tmp_path / "c" / "metadata.jsonl").exists() and not (tmp_path / "c" / "corpus.json").exists()


# ----------------------------------------------------------------------------- corruption
def _corrupt_copy(src: Path, dst: Path, edit) -> Path:
    shutil.copytree(src, dst)
    meta = dst / "metadata.jsonl"
    lines = meta.read_text(encoding="utf-8").splitlines()
    obj = json.loads(lines[2])
    lines[2] = edit(obj)
    meta.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return dst


def _set(key, value):
    def edit(obj):
        obj[key] = value
        return json.dumps(obj, ensure_ascii=False)
    return edit


def _drop(key):
    def edit(obj):
        del obj[key]
        return json.dumps(obj)
    return edit


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda obj: "{not json", "metadata.jsonl:3: not valid JSON"),
        (_drop("n_samples"), "missing field 'n_samples'"),
        (_set("n_samples", "many"), "'n_samples' must be int"),
        (lambda obj: json.dumps({**obj, "durations": obj["durations"][:-1]}), "durations for"),
        (lambda obj: json.dumps({**obj, "n_samples": obj["n_samples"] + 1}), "durations sum to"),
        (lambda obj: json.dumps({**obj, "durations": [-1] + obj["durations"][1:]}), "non-negative"),
        (lambda obj: json.dumps({**obj, "phonemes": ["ʘ"] + obj["phonemes"][1:]}), "not in the corpus symbol"),
        (_set("id", "s3-000000"), "duplicate id"),
        (_set("id", "../escape"), "not a plain file stem"),
        (lambda obj: "[1, 2]", "expected a JSON object"),
    ],
)
def test_corrupt_metadata_is_refused(built, tmp_path, edit, message):
    a, _, _ = built
    bad = _corrupt_copy(a, tmp_path / "bad", edit)
    with pytest.raises(CorpusError, match=message.replace("(", r"\(").replace("[", r"\[")):
        load_corpus(bad)


def test_missing_files_are_refused(built, tmp_path):
    a, _, _ = built
    with pytest.raises(CorpusError, match="corpus.json"):
        load_corpus(tmp_path)
    bad = tmp_path / "bad"
    shutil.copytree(a, bad)
    (bad / "wavs" / "s3-000004.wav").unlink()
    with pytest.raises(CorpusError, match="s3-000004.wav"):
        load_corpus(bad)
    assert len(load_corpus(bad, check_files=False)) == N
    info = json.loads((bad / "corpus.json").read_text())
    (bad / "corpus.json").write_text(json.dumps({**info, "mel": {**info["mel"], "hop_length": 200}}))
    with pytest.raises(CorpusError, match="mel config"):
        load_corpus(bad, check_files=False)
    (bad / "corpus.json").write_text(json.dumps({**info, "format_version": 99}))
    with pytest.raises(CorpusError, match="format_version"):
        load_corpus(bad, check_files=False)
    (bad / "corpus.json").write_text("{")
    with pytest.raises(CorpusError, match="not valid JSON"):
        load_corpus(bad, check_files=False)


def test_truncated_mel_is_refused_on_read(built, tmp_path):
    a, _, _ = built
    bad = tmp_path / "bad"
    shutil.copytree(a, bad)
    c = load_corpus(bad)
    r = c[1]
    np.save(r.mel_path, r.mel()[:-1])
    with pytest.raises(CorpusError, match="expected float32"):
        r.mel()


# sha256 of the 6 wav files (sorted by name) of build_corpus(utterances=6, seed=0, jobs=1), as
# built by every version of wavern since the default voice's training corpus was made.
GOLDEN_SEED0_6 = "c4734fdffd22522582a0fa76e195ae14bde3f94961348d83a8c0a4b1822be655"
# ... and of its metadata.jsonl (tokens, durations, word spans) and corpus.json (the symbol table's
# order among them): a same-length reordering of the table or another pause name would otherwise
# pass every other test and silently change a rebuilt corpus (recorded session 13).
GOLDEN_SEED0_6_META = "682e0d325d709df7f789229b21af8af9d06156d1e46aa3f9a1442258929e1aff"
GOLDEN_SEED0_6_CORPUS_JSON = "2e3af22d97a8a866981c6f567ac6b9a5ae1074b44d1a9c07415fe93578800f2f"


def test_build_bytes_have_not_changed(tmp_path):
    """The default voice's training runs resume across machines on a corpus rebuilt from its
    seed (assets/training/resume.sh), so a code change must not change the corpus bytes. This
    failed when the builder's token check started using ``analyze``'s faster events-only espeak
    pass, which leaves espeak's waveform state different for the next rendering."""
    import hashlib

    build_corpus(tmp_path / "c", utterances=6, seed=0, jobs=1, progress=False)
    h = hashlib.sha256()
    for p in sorted((tmp_path / "c" / "wavs").iterdir()):
        h.update(p.read_bytes())
    digest = {name: hashlib.sha256((tmp_path / "c" / name).read_bytes()).hexdigest()
              for name in ("metadata.jsonl", "corpus.json")}
    assert digest == {"metadata.jsonl": GOLDEN_SEED0_6_META, "corpus.json": GOLDEN_SEED0_6_CORPUS_JSON}, (
        "corpus records changed (tokens, durations, symbol table): a rebuilt corpus would not match the one "
        "the default voice trained on; if intended, record it in docs/TRAINING.md and update the hashes")
    assert h.hexdigest() == GOLDEN_SEED0_6, (
        "corpus bytes changed: a rebuilt corpus would no longer be the one the default voice trained on; "
        "if that is intended, record it in docs/TRAINING.md and update this hash")


def test_a_disk_that_fills_during_the_build_is_a_disk_full_error(tmp_path):
    from mounts import tmpfs

    from wavern.errors import DiskFullError

    with tmpfs(tmp_path / "tiny", 300) as mnt:  # room for the first utterances, not all: writes fail part-way
        with pytest.raises(DiskFullError, match="disk full while writing the corpus"):
            build_corpus(mnt / "c", utterances=6, seed=0, jobs=1, progress=False)
        assert not (mnt / "c" / "metadata.jsonl").exists()  # never mistaken for a complete corpus
