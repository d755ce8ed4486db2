"""Diagnostics behind docs/TRAINING.md's vocoder rows: the numbers that explain *why* a voice sounds as it does.

    .venv/bin/python bench/vocoder_diagnostics.py pulses runs/ltp_back/checkpoint.pt [more checkpoints]
    .venv/bin/python bench/vocoder_diagnostics.py acoustic-pitch runs/acoustic_pitch/checkpoint.pt
    .venv/bin/python bench/vocoder_diagnostics.py pulse-offsets
    .venv/bin/python bench/vocoder_diagnostics.py corpus-prosody

- ``pulses``: teacher-forced on held-out segments of the vocoder cache, how much probability the
  coarse softmax gives to a *pulse* (an excitation / innovation value of magnitude >= --level)
  at the samples that hold one and at the samples that do not. A net that places its pulses
  well gives them nearly all the mass where they are and little elsewhere; running free, the
  mass elsewhere becomes pulses at random times (the whispering docs/TRAINING.md records).
  Also the held-out loss of the same segments, so checkpoints compare on one footing.
- ``acoustic-pitch``: a pitch-predicting acoustic model (``AcousticConfig.pitch``) against the
  YIN pitch features of held-out sentences, with the true phone timings: the share of voiced
  frames more than 20 % off (GPE), the mean error in octaves, and the voicing disagreement
  (periodicity above / below 0.7) between prediction and truth. A prosody model
  (``AcousticConfig.prosody``) gets each sentence's espeak settings, or with ``--defaults``
  espeak's defaults (what it speaks with at inference).

- ``pulse-offsets``: in the true LPC residual (order 16, the mel's predictor) of held-out
  segments, where the largest |r| within ±8 samples of ``t - T`` lies for each pulse at t (a
  local maximum with |r| >= --level; T the frame's LTP lag): how well one period back points at
  this period's pulse; ``--lag-split T`` also counts short and long lags (high and low voices) apart.

- ``corpus-prosody``: how much of each sentence's pitch level, pitch spread and tempo its espeak
  settings (rate, pitch, range: drawn at random per sentence by the corpus builder) explain,
  within each voice: correlations of the settings with the mean and the spread of log2 f0 over
  voiced frames (the cache's pitch features) and with frames per phoneme.

Each prints JSON rows (one per checkpoint). Same segments / sentences for every checkpoint (fixed seed).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def pulses(checkpoint: str, *, cache: str, level: float, batches: int, seed: int) -> dict:
    import torch

    from wavern.dsp import DEFAULT_MEL, mulaw_expand
    from wavern.training.voice import load_vocoder_checkpoint
    from wavern.training.vocoder_data import VocoderData
    from wavern.vocoder.model import split_bytes

    model, ck = load_vocoder_checkpoint(checkpoint)
    cfg = model.config
    if not cfg.lpc_order:
        raise SystemExit(f"{checkpoint}: not an LPC vocoder (its values are samples, not an excitation)")
    data = VocoderData.open(cache, hop=cfg.hop_length)
    rng = np.random.default_rng(seed)
    centres = (np.arange(256) - 128) * 256.0 + 128  # each coarse class's middle value
    amp = np.abs(mulaw_expand(centres)) if cfg.excitation == "mulaw" else np.abs(centres)
    far = torch.from_numpy(amp >= level)
    at_true, at_other, n_true, n_all, loss = 0.0, 0.0, 0, 0, 0.0
    for _ in range(batches):
        b = data.batch(rng, batch_size=32, segment_frames=8, mel_pad=5, held_out=True, lpc_order=cfg.lpc_order,
                       mel_config=DEFAULT_MEL, pitch=cfg.pitch, ltp=cfg.ltp)
        mel, audio, prev, past, lpc = (torch.from_numpy(x) for x in b[:5])
        with torch.no_grad():
            cl, _ = model(mel, audio, prev_audio=prev, mel_pad=5, past=past, lpc=lpc)
            loss += float(model.loss(mel, audio, prev_audio=prev, mel_pad=5, past=past, lpc=lpc).total)
            coarse, _ = split_bytes(model.targets(audio, past=past, lpc=lpc))
        p_pulse = (torch.softmax(cl.float(), -1) * far).sum(-1)
        true = far[coarse]
        at_true += float(p_pulse[true].sum())
        at_other += float(p_pulse[~true].sum())
        n_true += int(true.sum())
        n_all += true.numel()
    return {"checkpoint": checkpoint, "step": int(ck["step"]), "level": level, "pulse_rate": n_true / n_all,
            "p_pulse_at_pulses": at_true / n_true, "p_pulse_elsewhere": at_other / (n_all - n_true),
            "held_out_loss": loss / batches}


def pulse_offsets(*, cache: str, level: float, seed: int, reach: int = 8, lag_split: int = 0) -> dict:
    from wavern.dsp import DEFAULT_MEL
    from wavern.training.vocoder_data import VocoderData
    from wavern.vocoder.config import VocoderConfig

    cfg = VocoderConfig(lpc_order=16, lpc_prediction_input=False, pitch=True, ltp=True)
    order, hop = cfg.lpc_order, cfg.hop_length
    data = VocoderData.open(cache, hop=hop)
    b = data.batch(np.random.default_rng(seed), batch_size=64, segment_frames=8, mel_pad=5, held_out=True,
                   lpc_order=order, mel_config=DEFAULT_MEL, pitch=True, ltp=True)
    past, audio, lpc = b.past.astype(np.float64), b.audio.astype(np.float64), b.lpc.astype(np.float32).astype(np.float64)
    m = cfg.history_samples - order  # residual samples before each segment
    n = audio.shape[1]
    s = np.concatenate([past, audio], axis=1)
    rows = (np.arange(-m, n) // hop) + cfg.history_frames
    a = lpc[:, rows]  # (B, m + n, columns)
    pred = np.zeros((len(s), m + n))
    for k in range(1, order + 1):
        pred -= a[..., k] * s[:, order - k:order - k + n + m]
    r = np.abs(s[:, order:] - pred)
    lag = a[..., order + 1].astype(int)
    hists = {"all": np.zeros(2 * reach + 1, int)}
    if lag_split:
        hists.update({f"lag<{lag_split}": np.zeros(2 * reach + 1, int), f"lag>={lag_split}": np.zeros(2 * reach + 1, int)})
    for i in range(len(r)):
        for t in range(m, m + n):
            if lag[i, t] <= 0 or r[i, t] < level or r[i, t] < r[i, t - 3:t + 4].max():
                continue
            k = int(np.argmax(r[i, t - lag[i, t] - reach:t - lag[i, t] + reach + 1]))
            hists["all"][k] += 1
            if lag_split:
                hists[f"lag<{lag_split}" if lag[i, t] < lag_split else f"lag>={lag_split}"][k] += 1

    def summary(hist):
        share = hist / max(hist.sum(), 1)
        return {"pulses": int(hist.sum()),
                "share_by_offset": {f"{d:+d}": round(float(x), 3) for d, x in zip(range(-reach, reach + 1), share)},
                "within_0": round(float(share[reach]), 3), "within_1": round(float(share[reach - 1:reach + 2].sum()), 3),
                "within_2": round(float(share[reach - 2:reach + 3].sum()), 3)}

    out = {"level": level, **summary(hists.pop("all"))}
    for name, hist in hists.items():  # with lag_split: low voices (long lags) apart from high ones
        out[name] = summary(hist)
    return out


def corpus_prosody(*, cache: str, corpus_dir: str) -> dict:
    index = json.loads((Path(cache) / "index.json").read_text())
    pitch = np.load(Path(cache) / "pitch.npy", mmap_mode="r")
    meta = {}
    for line in (Path(corpus_dir) / "metadata.jsonl").read_text().splitlines():
        r = json.loads(line)
        meta[r["id"]] = r
    by_voice: dict[str, list[tuple]] = {}
    for i, uid in enumerate(index["ids"]):
        lo, hi = index["frame_offsets"][i], index["frame_offsets"][i + 1]
        p = np.asarray(pitch[lo:hi])
        voiced = p[:, 1] > 0.7
        m = meta[uid]
        if voiced.sum() < 20 or m.get("rate") is None:
            continue
        lf = p[voiced, 0]
        by_voice.setdefault(m["voice"], []).append(
            (m["pitch"], m["pitch_range"], m["rate"], lf.mean(), lf.std(), (hi - lo) / max(len(m["phonemes"]), 1)))

    def within(a: int, b: int) -> tuple[float, float]:  # correlation of columns a, b after each voice's means
        xs, ys = [], []
        for rows in by_voice.values():
            if len(rows) >= 5:
                arr = np.array(rows, float)
                xs.append(arr[:, a] - arr[:, a].mean())
                ys.append(arr[:, b] - arr[:, b].mean())
        x, y = np.concatenate(xs), np.concatenate(ys)
        return float(np.corrcoef(x, y)[0, 1]), float(np.sqrt(np.mean(y ** 2)))

    (c_level, sd_level), (c_spread, _), (c_rate, _) = within(0, 3), within(1, 4), within(2, 5)
    return {"sentences": sum(len(v) for v in by_voice.values()), "voices": len(by_voice),
            "corr_pitch_vs_mean_log2_f0": round(c_level, 3), "std_of_mean_log2_f0_octave": round(sd_level, 3),
            "corr_range_vs_std_log2_f0": round(c_spread, 3), "corr_rate_vs_frames_per_phoneme": round(c_rate, 3)}


def acoustic_pitch(checkpoint: str, *, corpus_dir: str, n_utts: int, defaults: bool = False) -> dict:
    import torch

    from wavern.conditioning.frontend.phonemes import SymbolTable
    from wavern.training.acoustic_trainer import _items, _pitch_features_of, load_checkpoint, prosody_of
    from wavern.training.corpus import load_corpus

    model, ck = load_checkpoint(checkpoint)
    cfg = model.config
    if not cfg.pitch:
        raise SystemExit(f"{checkpoint}: this acoustic model does not predict pitch")
    corpus = load_corpus(corpus_dir)
    table = SymbolTable.from_list(corpus.symbols)
    held = sorted((r for r in corpus.held_out if r.voice in cfg.speakers), key=lambda r: r.id)[:n_utts]
    n_mels = cfg.n_mels
    voiced_n, gross, err_sum, disagree, frames = 0, 0, 0.0, 0, 0
    with torch.no_grad():
        for it in _items(held, table, cfg.speakers, cfg.hop_length, max_frames=10 ** 9):
            out = model(torch.as_tensor(it.ids)[None], torch.as_tensor(it.is_global)[None],
                        torch.as_tensor(it.frames)[None], speaker=torch.tensor([it.speaker]),
                        prosody=None if defaults else torch.as_tensor(prosody_of(it.record))[None])
            pred = out.mel[0, :, n_mels:].numpy()
            true = _pitch_features_of(it.record)
            voiced = true[:, 1] > 0.7
            err = np.abs(pred[voiced, 0] - true[voiced, 0])  # octaves
            voiced_n += int(voiced.sum())
            gross += int((err > np.log2(1.2)).sum())
            err_sum += float(err.sum())
            disagree += int(((pred[:, 1] > 0.7) != voiced).sum())
            frames += len(true)
    return {"checkpoint": checkpoint, "step": int(ck["step"]), "prosody": ("defaults" if defaults else "given") if cfg.prosody else "none",
            "sentences": len(held), "voiced_frames": voiced_n,
            "gpe": gross / voiced_n, "mean_octave_error": err_sum / voiced_n, "voicing_disagreement": disagree / frames}


def main(argv: list[str] | None = None) -> None:
    sys.path.insert(0, str(ROOT))
    import torch

    torch.set_num_threads(1)
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="what", required=True)
    a = sub.add_parser("pulses", help="teacher-forced pulse probabilities of LPC vocoder checkpoints")
    a.add_argument("checkpoints", nargs="+")
    a.add_argument("--cache", default=str(ROOT / "runs/vocoder/cache"))
    a.add_argument("--level", type=float, default=1024.0, help="|value| from which a coarse class counts as a pulse")
    a.add_argument("--batches", type=int, default=1, help="batches of 32 held-out segments of 8 frames")
    a.add_argument("--seed", type=int, default=5)
    b = sub.add_parser("acoustic-pitch", help="pitch error of pitch-predicting acoustic checkpoints")
    b.add_argument("checkpoints", nargs="+")
    b.add_argument("--corpus", default=str(ROOT / "data/corpus"))
    b.add_argument("--n-utts", type=int, default=16)
    b.add_argument("--defaults", action="store_true", help="a prosody model gets espeak's default settings")
    c = sub.add_parser("pulse-offsets", help="where the pulse one period back lies, in the true residual")
    c.add_argument("--cache", default=str(ROOT / "runs/vocoder/cache"))
    c.add_argument("--level", type=float, default=1024.0)
    c.add_argument("--seed", type=int, default=5)
    c.add_argument("--lag-split", type=int, default=0, metavar="T",
                   help="also count pulses with lag < T and >= T apart (0: not)")
    d = sub.add_parser("corpus-prosody", help="how much of the pitch and tempo the espeak settings explain")
    d.add_argument("--cache", default=str(ROOT / "runs/vocoder/cache"))
    d.add_argument("--corpus", default=str(ROOT / "data/corpus"))
    args = p.parse_args(argv)
    if args.what == "pulse-offsets":
        print(json.dumps(pulse_offsets(cache=args.cache, level=args.level, seed=args.seed, lag_split=args.lag_split)))
        return
    if args.what == "corpus-prosody":
        print(json.dumps(corpus_prosody(cache=args.cache, corpus_dir=args.corpus)))
        return
    for ck in args.checkpoints:
        if args.what == "pulses":
            row = pulses(ck, cache=args.cache, level=args.level, batches=args.batches, seed=args.seed)
        else:
            row = acoustic_pitch(ck, corpus_dir=args.corpus, n_utts=args.n_utts, defaults=args.defaults)
        print(json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}), flush=True)


if __name__ == "__main__":
    main()
