"""Continue a vocoder run on a lent GPU for a fixed wall-clock budget, from a self-contained pack.

A GPU machine here is lent for minutes and sees only what travels with the working tree
(64 MiB in all), not the 200-minute corpus. So the work is split in two:

``pack`` (here, on the CPU): a random subset of the training utterances that fits a byte budget
(int16 audio, first differences, LZMA: ~1.7x smaller), a few held-out utterances for the
held-out loss, the mel filterbank and window of :func:`wavern.dsp.log_mel`, for a pitch vocoder
the utterances' pitch features (the cache's ``pitch.npy``, 8 bytes a frame), and the run's
compact checkpoint::

    python -m wavern.training.vocoder_gpu pack runs/vocoder/cache runs/vocoder/compact.pt gpu_pack

``train`` (there): unpack, compute the log-mels on the GPU (the same centred STFT, tested equal to
``log_mel``), keep all audio and mels in GPU memory, then run the ordinary
:class:`~wavern.training.vocoder_trainer.VocoderTrainer` step (cuDNN's GRU, same loss, same
pruning masks) with large batches until the budget is spent. The learning rate warms up and then
follows a cosine in *wall time*, since the step count is unknown in advance. The held-out loss is
measured every ``--eval-every-s`` seconds; ``best.pt`` (lowest held-out loss) and ``last.pt`` are
full trainer checkpoints, so the CPU run resumes from either with ``--resume``::

    python3 training/vocoder_gpu.py train gpu_pack $OUT --budget-s 420

On the device machine the package is not installed; running this file directly puts the
checkout's folders on ``wavern``'s package path (they map one to one, pyproject.toml).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import lzma
import math
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import torch

if __package__ in (None, ""):  # run as a file on a machine without the package installed
    _root = Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(_root))
    import wavern

    wavern.__path__.append(str(_root))  # wavern.vocoder -> ./vocoder, wavern.training -> ./training, ...

from wavern.dsp import MelConfig  # noqa: E402
from wavern.errors import CorpusError, ParameterError  # noqa: E402
from wavern.training.vocoder_data import VocoderBatch  # noqa: E402
from wavern.training.vocoder_trainer import VocoderTrainConfig, VocoderTrainer  # noqa: E402
from wavern.vocoder.config import VocoderConfig  # noqa: E402

__all__ = ["pack", "unpack_audio", "log_mel_torch", "GpuSegments", "train"]

log = logging.getLogger(__name__)

PACK_VERSION = 1
BF16_PREMIUM = 1.3  # bfloat16 must be this much faster than float32 to be chosen


# ---------------------------------------------------------------------------------------- pack
def _compress(audio: np.ndarray) -> bytes:
    d = np.diff(audio.astype(np.int32), prepend=0).astype(np.int16)  # wraps like the int16 cumsum undoes
    return lzma.compress(d.tobytes(), preset=6)


def unpack_audio(blob: bytes) -> np.ndarray:
    """Inverse of the pack's audio coding: LZMA, then a cumulative sum in int16 arithmetic."""
    d = np.frombuffer(lzma.decompress(blob), np.int16)
    return np.cumsum(d, dtype=np.int16)


def pack(cache_dir: str | Path, checkpoint: str | Path, out_dir: str | Path, *, max_bytes: int = 30_000_000,
         n_held: int = 15, seed: int = 0) -> dict:
    """Write a GPU pack of the vocoder cache ``cache_dir`` (:func:`wavern.training.vocoder_data.build_cache`).

    Training utterances are drawn in a seeded random order until the compressed audio would pass
    ``max_bytes``; ``n_held`` held-out utterances come first. Returns the pack's index.
    """
    from wavern.dsp import _window, mel_filterbank

    cache_dir, out_dir = Path(cache_dir), Path(out_dir)
    voc = VocoderConfig.from_dict(torch.load(checkpoint, map_location="cpu", weights_only=False)["vocoder_config"])
    if voc.phase_input:
        raise ParameterError(f"{checkpoint} reads the pulse phase: the GPU pack has none")
    mel = voc.mel
    index = json.loads((cache_dir / "index.json").read_text())
    audio = np.load(cache_dir / "audio.npy", mmap_mode="r")
    offsets = np.asarray(index["sample_offsets"], np.int64)
    held = np.asarray(index["held_out"], bool)
    rng = np.random.default_rng(seed)
    held_ids = rng.permutation(np.nonzero(held)[0])[:n_held]
    train_ids = rng.permutation(np.nonzero(~held)[0])
    chosen = list(held_ids)
    est = 0.0  # estimated compressed bytes, from a running ratio
    ratio = 1.7
    for u in train_ids:
        n = int(offsets[u + 1] - offsets[u])
        if est + 2 * n / ratio > max_bytes * 0.97:
            break
        chosen.append(int(u))
        est += 2 * n / ratio
    while True:
        parts = [np.asarray(audio[offsets[u]:offsets[u + 1]]) for u in chosen]
        blob = _compress(np.concatenate(parts))
        if len(blob) <= max_bytes:
            break
        chosen = chosen[:int(len(chosen) * 0.95)]  # the estimate was optimistic: drop the last 5 %
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "audio.xz").write_bytes(blob)
    lengths = [int(offsets[u + 1] - offsets[u]) for u in chosen]
    if voc.pitch:  # the frames of the chosen utterances, in their order (1 + n // hop frames each)
        if not (cache_dir / "pitch.npy").is_file():
            raise ParameterError(f"{checkpoint} is a pitch vocoder but {cache_dir} has no pitch.npy "
                                 "(wavern.training.vocoder_data.build_pitch)")
        pitch = np.load(cache_dir / "pitch.npy", mmap_mode="r")
        f_off = np.asarray(index["frame_offsets"], np.int64)
        np.save(out_dir / "pitch.npy", np.concatenate([np.asarray(pitch[f_off[u]:f_off[u + 1]]) for u in chosen]))
    np.savez(out_dir / "dsp.npz", filterbank=mel_filterbank(mel), window=_window(mel.win_length, mel.n_fft))
    shutil.copyfile(checkpoint, out_dir / "init.pt")
    meta = {"version": PACK_VERSION, "ids": [index["ids"][u] for u in chosen], "lengths": lengths,
            "held_out": [bool(held[u]) for u in chosen], "mel": mel.to_dict(), "seed": seed, "pitch": voc.pitch,
            "train_minutes": sum(n for n, h in zip(lengths, held[chosen]) if not h) / mel.sample_rate / 60,
            "held_out_minutes": sum(n for n, h in zip(lengths, held[chosen]) if h) / mel.sample_rate / 60,
            "audio_bytes": len(blob)}
    (out_dir / "index.json").write_text(json.dumps(meta))
    return meta


# ---------------------------------------------------------------------------------------- mels
def log_mel_torch(audio: torch.Tensor, filterbank: torch.Tensor, window: torch.Tensor, cfg: MelConfig) -> torch.Tensor:
    """:func:`wavern.dsp.log_mel` of int16 samples (n,) in torch, on their device: (1 + n // hop, n_mels)."""
    x = audio.to(torch.float32) / 32768.0
    pad = cfg.n_fft // 2
    if x.numel() == 0:
        return torch.full((1, cfg.n_mels), math.log(cfg.log_floor), device=x.device)
    mode = "reflect" if x.numel() > pad else "constant"
    xp = torch.nn.functional.pad(x[None, None], (pad, pad), mode=mode)[0, 0]
    frames = xp.unfold(0, cfg.n_fft, cfg.hop_length)  # (1 + n // hop, n_fft)
    spec = torch.fft.rfft(frames * window, dim=1).abs()
    return torch.log(torch.clamp(spec @ filterbank.T, min=cfg.log_floor))


# ---------------------------------------------------------------------------------------- data
class GpuSegments:
    """:class:`~wavern.training.vocoder_data.VocoderData`'s sampler with everything in device memory.

    Draws utterances and start frames exactly as ``VocoderData.batch`` does (same generator calls),
    then gathers the segments with index arithmetic on the device; returns tensors.
    """

    def __init__(self, audio: torch.Tensor, mels: torch.Tensor, lengths: np.ndarray, held_out: np.ndarray,
                 hop: int, pitch: torch.Tensor | None = None) -> None:
        self.audio, self.mels, self.hop, self.pitch = audio, mels, hop, pitch
        self.lengths = np.asarray(lengths, np.int64)
        self.held_out = np.asarray(held_out, bool)
        self.sample_offsets = np.concatenate([[0], np.cumsum(self.lengths)])
        self.frame_offsets = np.concatenate([[0], np.cumsum(1 + self.lengths // hop)])
        if pitch is not None and tuple(pitch.shape) != (self.mels.shape[0], 2):
            raise ParameterError(f"pitch features must be ({self.mels.shape[0]}, 2), one row per mel frame; "
                                 f"found {tuple(pitch.shape)}")
        self._lpc: tuple[tuple, torch.Tensor, torch.Tensor] | None = None  # key, every frame's row, a 0-frame's
        self._with_pitch = None if pitch is None else torch.cat([mels, pitch], dim=1)  # a pitch vocoder's features

    def _predictors(self, order: int, mel_config: MelConfig | None, ltp: bool) -> tuple[torch.Tensor, torch.Tensor]:
        """Every frame's order-``order`` predictor, with ``ltp`` followed by its (lag, gain), and those of an
        all-zero frame (computed once, on the CPU, kept on the device)."""
        if self._lpc is None or self._lpc[0] != (order, ltp):
            from wavern.dsp import DEFAULT_MEL, ltp_params, mel_lpc

            cfg = mel_config or DEFAULT_MEL
            rows = np.concatenate([self.mels.cpu().numpy(), np.zeros((1, self.mels.shape[1]), np.float32)])
            a = mel_lpc(rows, order, cfg)
            if ltp:
                pitch = np.concatenate([self.pitch.cpu().numpy(), np.zeros((1, 2), np.float32)])
                a = np.concatenate([a, ltp_params(pitch, cfg).astype(np.float64)], axis=1)
            a = torch.from_numpy(a).to(self.audio.device)
            self._lpc = ((order, ltp), a[:-1], a[-1])
        return self._lpc[1], self._lpc[2]

    def split(self, held_out: bool) -> np.ndarray:
        return np.nonzero(self.held_out == held_out)[0]

    def batch(self, rng: np.random.Generator, *, batch_size: int, segment_frames: int, mel_pad: int,
              held_out: bool = False, gta_prob: float = 0.0, lpc_order: int = 0, mel_config=None,
              pitch: bool = False, ltp: bool = False, phase: bool = False) -> VocoderBatch:
        if gta_prob:
            raise ParameterError("the GPU pack has no GTA mels")
        if phase:
            raise ParameterError("the GPU pack has no pulse phase")
        if pitch and self.pitch is None:
            raise ParameterError("pitch features asked for but the GPU pack has none (packed from a non-pitch run)")
        if ltp and not pitch:
            raise ParameterError("a long-term predictor (ltp) is computed from the pitch features: pass pitch=True")
        utts = self.split(held_out)
        if utts.size == 0:  # as VocoderData.batch
            raise CorpusError(f"the GPU pack has no {'held-out' if held_out else 'training'} utterances")
        full_frames = np.maximum(self.lengths[utts] // self.hop, 1)
        pick = rng.choice(utts.size, size=batch_size, p=full_frames / full_frames.sum())
        starts = rng.integers(0, np.maximum(full_frames[pick] - segment_frames, 0) + 1)
        u = utts[pick]
        dev = self.audio.device
        t, hop = segment_frames, self.hop
        a0 = torch.as_tensor(self.sample_offsets[u] + starts * hop, device=dev)
        s_hi = torch.as_tensor(self.sample_offsets[u + 1], device=dev)
        idx = a0[:, None] + torch.arange(t * hop, device=dev)
        audio = torch.where(idx < s_hi[:, None], self.audio[idx.clamp(max=self.audio.numel() - 1)], 0)
        prev = torch.where(torch.as_tensor(starts > 0, device=dev), self.audio[(a0 - 1).clamp(min=0)], 0)
        m_lo = torch.as_tensor(self.frame_offsets[u], device=dev)
        m_hi = torch.as_tensor(self.frame_offsets[u + 1], device=dev)
        fidx = (m_lo + torch.as_tensor(starts, device=dev) - mel_pad)[:, None] + torch.arange(t + 2 * mel_pad,
                                                                                              device=dev)
        inside = (fidx >= m_lo[:, None]) & (fidx < m_hi[:, None])
        feats = self._with_pitch if pitch else self.mels
        mel = torch.where(inside[..., None], feats[fidx.clamp(0, feats.shape[0] - 1)], 0.0)
        if not lpc_order:
            return VocoderBatch(mel, audio.to(torch.int16), prev.to(torch.int16))
        # as VocoderData.segments: the samples before (P + 1; with ltp LTP_MAX_LAG + 1 more), the
        # predictors of the frames before (1; with ltp enough for those samples) and of the segment's
        # frames (an all-zero frame's past the utterance's end, none before its start)
        from wavern.dsp import LTP_MAX_LAG

        k = -(-(LTP_MAX_LAG + 1) // hop) if ltp else 1  # VocoderConfig.history_frames
        n_past = lpc_order + 1 + (LTP_MAX_LAG + 1 if ltp else 0)  # VocoderConfig.history_samples
        every, zero_frame = self._predictors(lpc_order, mel_config, ltp)
        s_lo = torch.as_tensor(self.sample_offsets[u], device=dev)
        pidx = a0[:, None] - n_past + torch.arange(n_past, device=dev)
        past = torch.where(pidx >= s_lo[:, None], self.audio[pidx.clamp(min=0)], 0)
        ridx = (m_lo + torch.as_tensor(starts, device=dev) - k)[:, None] + torch.arange(t + k, device=dev)
        inside = (ridx >= m_lo[:, None]) & (ridx < m_hi[:, None])
        lpc = torch.where(inside[..., None], every[ridx.clamp(0, every.shape[0] - 1)], zero_frame)
        before = ridx < m_lo[:, None]
        lpc[before] = 0.0
        lpc[before, 0] = 1.0
        return VocoderBatch(mel, audio.to(torch.int16), prev.to(torch.int16), past.to(torch.int16), lpc)


class _GpuTrainer(VocoderTrainer):
    def _to_tensors(self, batch):  # GpuSegments already returns device tensors
        return batch.mel, batch.audio, batch.prev, batch.past, batch.lpc, None


def load_pack(pack_dir: str | Path, device: torch.device) -> tuple[GpuSegments, dict]:
    pack_dir = Path(pack_dir)
    meta = json.loads((pack_dir / "index.json").read_text())
    if meta.get("version") != PACK_VERSION:
        raise ParameterError(f"{pack_dir} is not a version-{PACK_VERSION} GPU pack")
    cfg = MelConfig.from_dict(meta["mel"])
    audio = torch.from_numpy(unpack_audio((pack_dir / "audio.xz").read_bytes()).copy()).to(device)
    lengths = np.asarray(meta["lengths"], np.int64)
    if audio.numel() != lengths.sum():
        raise ParameterError(f"pack audio has {audio.numel()} samples, its index says {lengths.sum()}")
    dsp = np.load(pack_dir / "dsp.npz")
    fb = torch.from_numpy(dsp["filterbank"]).to(device)
    win = torch.from_numpy(dsp["window"]).to(device)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    mels = torch.cat([log_mel_torch(audio[offsets[i]:offsets[i + 1]], fb, win, cfg) for i in range(lengths.size)])
    pitch = None
    if meta.get("pitch"):
        pitch = torch.from_numpy(np.load(pack_dir / "pitch.npy")).to(device)
    return GpuSegments(audio, mels, lengths, np.asarray(meta["held_out"], bool), cfg.hop_length, pitch), meta


# ---------------------------------------------------------------------------------------- train
def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _step_time(trainer: VocoderTrainer, batch_size: int, segment_frames: int, bf16: bool, reps: int = 2) -> float:
    """Seconds per forward+backward at this shape (no optimiser step: the weights do not move)."""
    trainer.bf16 = bf16
    rng = np.random.default_rng(12345)
    data = trainer.data
    times = []
    for _ in range(reps + 1):
        voc = trainer.cfg.vocoder
        b = data.batch(rng, batch_size=batch_size, segment_frames=segment_frames, mel_pad=trainer.mel_pad,
                       lpc_order=voc.lpc_order, mel_config=voc.mel, pitch=voc.pitch, ltp=voc.ltp)
        _sync(trainer.device)
        t0 = time.perf_counter()
        with trainer._autocast():
            loss = trainer.model.loss(b.mel, b.audio, prev_audio=b.prev, mel_pad=trainer.mel_pad, past=b.past, lpc=b.lpc)
        loss.total.backward()
        trainer.optimizer.zero_grad(set_to_none=True)
        _sync(trainer.device)
        times.append(time.perf_counter() - t0)
    return float(np.median(times[1:]))


def train(pack_dir: str | Path, out_dir: str | Path, *, budget_s: float, lr_peak: float = 3e-4,
          lr_end: float = 3e-5, warmup_steps: int = 100, eval_every_s: float = 45.0,
          shapes: tuple[tuple[int, int], ...] = ((1024, 8), (2048, 8), (4096, 8)), device: str = "cuda",
          precisions: tuple[bool, ...] = (False,), unmask: bool = False, save: bool = True,
          reserve_s: float = 15.0, eval_batches: int = 2) -> dict:
    """Train from the pack's checkpoint for ``budget_s`` seconds (set-up included); write best.pt / last.pt.

    ``precisions``: the bf16 settings to time (one shape and one precision skip the timing). float32
    alone by default: on an H200, bfloat16 autocast over cuDNN's GRU (input projection included) made
    the held-out loss *rise* by 0.045 nats in 260 steps where float32 lowered it (docs/TRAINING.md, "What was tried").
    ``reserve_s``: seconds of the budget kept for the last evaluation and the saves.
    ``unmask``: drop the pruning masks (every recurrent and head weight trains; an ablation of the
    sparsity, not a model the engine could run in real time). ``save=False``: only report.json.
    """
    t_start = time.perf_counter()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    dev = torch.device(device)
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    data, meta = load_pack(pack_dir, dev)
    ck = torch.load(Path(pack_dir) / "init.pt", map_location="cpu", weights_only=False)
    voc = VocoderConfig.from_dict(ck["vocoder_config"])
    base = dict(ck["train_config"])
    base.pop("vocoder", None)
    known = {f.name for f in dataclasses.fields(VocoderTrainConfig)}
    cfg = VocoderTrainConfig(**{k: v for k, v in base.items() if k in known and k != "vocoder"}, vocoder=voc)
    cfg = dataclasses.replace(cfg, device=device, run_dir=str(out_dir), eval_batches=eval_batches, progress=False)
    trainer = _GpuTrainer(cfg)
    trainer.load(Path(pack_dir) / "init.pt", exact=False)
    trainer.data = data
    step0 = trainer.step
    report = {"pack": {k: meta[k] for k in ("train_minutes", "held_out_minutes", "audio_bytes")},
              "torch": torch.__version__,
              "device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu",
              "start_step": step0, "setup_s": round(time.perf_counter() - t_start, 1), "shapes": []}
    print(f"pack: {meta['train_minutes']:.1f} min train, {meta['held_out_minutes']:.1f} min held out; "
          f"step {step0}; set-up {report['setup_s']} s", flush=True)

    if unmask:
        trainer.pruner.config = dataclasses.replace(trainer.pruner.config, target_density=1.0)
        trainer.pruner.masks = {n: torch.ones_like(m) for n, m in trainer.pruner.masks.items()}
        trainer.pruner.sparsity = 0.0
    # Time every candidate shape and precision (forward + backward, weights untouched).
    for bf16 in precisions:
        for b, t in shapes:
            if len(shapes) * len(precisions) == 1:
                report["shapes"].append({"batch": b, "segment_frames": t, "bf16": bf16})
                break
            try:
                dt = _step_time(trainer, b, t, bf16)
            except (RuntimeError, torch.OutOfMemoryError) as exc:
                print(f"shape {b}x{t} bf16={bf16}: failed ({str(exc)[:120]})", flush=True)
                if dev.type == "cuda":
                    torch.cuda.empty_cache()
                continue
            sps = b * t * cfg.vocoder.hop_length / dt
            report["shapes"].append({"batch": b, "segment_frames": t, "bf16": bf16, "s_per_step": dt,
                                     "samples_per_s": sps})
            print(f"shape {b}x{t} bf16={bf16}: {dt * 1e3:.0f} ms/step, {sps / 1e6:.2f} M samples/s", flush=True)
    if not report["shapes"]:
        raise RuntimeError("no training shape ran on this device")
    # bfloat16 only where it is clearly faster (float32/TF32 is closer to the engine's float32 arithmetic);
    # then the smallest shape within 15 % of the best: more steps for nearly the same samples per second.
    score = {id(s): s.get("samples_per_s", 1.0) / (BF16_PREMIUM if s["bf16"] else 1.0) for s in report["shapes"]}
    top = max(score.values())
    pick = min((s for s in report["shapes"] if score[id(s)] >= 0.85 * top),
               key=lambda s: (s["batch"] * s["segment_frames"], s["bf16"]))
    batch_size, seg, bf16 = pick["batch"], pick["segment_frames"], pick["bf16"]
    trainer.bf16 = bf16
    trainer.cfg = cfg = dataclasses.replace(cfg, batch_size=batch_size, segment_frames=seg)
    report.update(batch_size=batch_size, segment_frames=seg, bf16=bf16)

    t_train0 = time.perf_counter()
    train_budget = budget_s - (t_train0 - t_start) - reserve_s
    lr_start = float(trainer.optimizer.param_groups[0]["lr"])

    def schedule(step: int) -> float:
        k = step - step0
        if k < warmup_steps:
            return lr_start + (lr_peak - lr_start) * k / warmup_steps
        frac = min(1.0, (time.perf_counter() - t_train0) / max(train_budget, 1.0))
        return lr_end + 0.5 * (lr_peak - lr_end) * (1.0 + math.cos(math.pi * frac))

    trainer.lr_schedule = schedule
    ev = trainer.evaluate()
    best_eval = ev["eval_loss"]
    report["evals"] = [{"step": trainer.step, "s": 0.0, **ev}]
    print(f"step {trainer.step}: held-out {ev['eval_loss']:.4f} (c {ev['eval_coarse']:.3f}, f {ev['eval_fine']:.3f})",
          flush=True)
    if save:
        trainer.save(out_dir / "best.pt")
    rows: list[dict] = []
    t_eval = t_log = time.perf_counter()
    while time.perf_counter() - t_train0 < train_budget:
        rows.append(trainer.train_step())
        now = time.perf_counter()
        if now - t_log >= 15.0:
            m = {k: float(np.mean([r[k] for r in rows])) for k in ("loss", "coarse", "fine", "grad_norm")}
            print(f"step {trainer.step} t {now - t_train0:.0f}s: loss {m['loss']:.4f} (c {m['coarse']:.3f}, "
                  f"f {m['fine']:.3f}) |g| {m['grad_norm']:.2f} lr {rows[-1]['lr']:.2e}", flush=True)
            rows, t_log = [], now
        if now - t_eval >= eval_every_s:
            ev = trainer.evaluate()
            report["evals"].append({"step": trainer.step, "s": round(now - t_train0, 1), **ev})
            mark = ""
            if ev["eval_loss"] < best_eval:
                best_eval = ev["eval_loss"]
                if save:
                    trainer.save(out_dir / "best.pt")
                mark = " (best)"
            print(f"step {trainer.step}: held-out {ev['eval_loss']:.4f} (c {ev['eval_coarse']:.3f}, "
                  f"f {ev['eval_fine']:.3f}){mark}", flush=True)
            (out_dir / "report.json").write_text(json.dumps(report, indent=1))
            t_eval = time.perf_counter()
    trainer.wall_s += time.perf_counter() - t_train0
    ev = trainer.evaluate()
    report["evals"].append({"step": trainer.step, "s": round(time.perf_counter() - t_train0, 1), **ev})
    if ev["eval_loss"] < best_eval:
        best_eval = ev["eval_loss"]
        if save:
            trainer.save(out_dir / "best.pt")
    if save:
        trainer.save(out_dir / "last.pt")
    report.update(unmask=unmask, end_step=trainer.step, best_eval=best_eval, train_s=round(time.perf_counter() - t_train0, 1))
    (out_dir / "report.json").write_text(json.dumps(report, indent=1))
    print(f"done: steps {step0} -> {trainer.step}, held-out {report['evals'][0]['eval_loss']:.4f} -> "
          f"{ev['eval_loss']:.4f} (best {best_eval:.4f})", flush=True)
    return report


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m wavern.training.vocoder_gpu", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    pk = sub.add_parser("pack", help="write a GPU pack from a vocoder cache and a checkpoint")
    pk.add_argument("cache_dir")
    pk.add_argument("checkpoint")
    pk.add_argument("out_dir")
    pk.add_argument("--max-bytes", type=int, default=30_000_000)
    pk.add_argument("--n-held", type=int, default=15)
    pk.add_argument("--seed", type=int, default=0)
    tr = sub.add_parser("train", help="train from a pack for a wall-clock budget")
    tr.add_argument("pack_dir")
    tr.add_argument("out_dir")
    tr.add_argument("--budget-s", type=float, required=True)
    tr.add_argument("--lr-peak", type=float, default=3e-4)
    tr.add_argument("--lr-end", type=float, default=3e-5)
    tr.add_argument("--eval-every-s", type=float, default=45.0)
    tr.add_argument("--shapes", default="1024x8,2048x8,4096x8", help="batch x segment frames candidates")
    tr.add_argument("--device", default="cuda")
    tr.add_argument("--precisions", default="fp32", help="precisions to time: fp32 (default), bf16 or both")
    tr.add_argument("--unmask", action="store_true", help="ablation: train without the pruning masks")
    tr.add_argument("--no-save", action="store_true", help="write only report.json (no checkpoints)")
    tr.add_argument("--eval-batches", type=int, default=2, help="fixed held-out batches per evaluation")
    a = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if a.cmd == "pack":
        meta = pack(a.cache_dir, a.checkpoint, a.out_dir, max_bytes=a.max_bytes, n_held=a.n_held, seed=a.seed)
        print(json.dumps({k: meta[k] for k in ("train_minutes", "held_out_minutes", "audio_bytes")}))
        return 0
    shapes = tuple(tuple(int(v) for v in s.split("x")) for s in a.shapes.split(","))
    train(a.pack_dir, a.out_dir, budget_s=a.budget_s, lr_peak=a.lr_peak, lr_end=a.lr_end,
          eval_every_s=a.eval_every_s, shapes=shapes, device=a.device,
          precisions=tuple(p == "bf16" for p in a.precisions.split(",")), unmask=a.unmask, save=not a.no_save,
          eval_batches=a.eval_batches)
    return 0


if __name__ == "__main__":
    sys.exit(main())
