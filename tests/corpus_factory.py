"""A small synthetic corpus in the real on-disk layout, for trainer tests.

The mel of every token is a fixed vector per phoneme plus a little noise, so a model can learn
it (and tell from the audio which phoneme a token is) in a few steps. Durations are random.
"""

from __future__ import annotations

import json

import numpy as np

from wavern.conditioning.frontend.phonemes import DEFAULT_SYMBOLS
from wavern.dsp import DEFAULT_MEL, frames_for_samples
from wavern.training.corpus import is_held_out, write_wav

PHONES = ["n", "t", "s", "ə", "ˈæ", "k", "l", "m"]
VOICES = ["en-us", "en-gb"]


def make_fake_corpus(root, *, n_utts: int = 24, seed: int = 0, words: tuple[int, int] = (1, 4),
                     durations: tuple[int, int] = (0, 600)):
    """Write ``n_utts`` utterances (3 held out) under ``root``; ``words`` and ``durations`` are
    the [low, high) ranges of words per utterance and samples per token."""
    rng = np.random.default_rng(seed)
    (root / "mels").mkdir(parents=True)
    (root / "wavs").mkdir()
    vec = {p: rng.normal(-5, 2, 80).astype(np.float32) for p in PHONES + ["_", ".", ",", "<bos>", "<eos>", " "]}
    texts, held, i = [], [], 0
    while len(texts) < n_utts - 3 or len(held) < 3:
        text = f"utterance number {i}"
        i += 1
        bucket = held if is_held_out(text) else texts
        if len(bucket) < (3 if bucket is held else n_utts - 3):
            bucket.append(text)
    rows = []
    for text in texts + held:
        ws = [list(rng.choice(PHONES, rng.integers(2, 5))) for _ in range(rng.integers(*words))]
        phon = ["<bos>"]
        for w, word in enumerate(ws):
            phon += word + ([" "] if w < len(ws) - 1 else [])
        phon += [".", "<eos>"]
        dur = [int(rng.integers(*durations)) if p not in ("<eos>", " ") else 0 for p in phon]
        n = sum(dur)
        frames = frames_for_samples(n)
        bounds = np.minimum(np.floor(np.cumsum(dur) / 256 + 0.5).astype(int), frames)
        bounds[-1] = frames
        mel = np.zeros((frames, 80), np.float32)
        start = 0
        for p, b in zip(phon, bounds):
            mel[start:b] = vec[p] + rng.normal(0, 0.1, (b - start, 80))
            start = b
        rid = f"u{len(rows):03d}"
        np.save(root / "mels" / f"{rid}.npy", mel)
        write_wav(root / "wavs" / f"{rid}.wav", np.zeros(n, np.int16))
        k = len(rows)  # espeak settings that vary, as the real corpus's do
        rows.append({"id": rid, "text": text, "spoken": text, "voice": VOICES[k % 2], "rate": 130 + 7 * k % 100,
                     "pitch": 25 + 11 * k % 50, "pitch_range": 20 + 13 * k % 70, "phonemes": phon, "durations": dur,
                     "word_spans": None, "n_samples": n})
    (root / "metadata.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    info = {"format": "wavern-corpus", "format_version": 1, "mel": DEFAULT_MEL.to_dict(),
            "symbols": list(DEFAULT_SYMBOLS), "utterances": len(rows)}
    (root / "corpus.json").write_text(json.dumps(info), encoding="utf-8")
    return root
