"""Replaced-token detection (CodeBERT / ELECTRA): the examples, their corruption and the
discriminator that spots it. :mod:`wavern.training.pretrain` trains it.

``corrupt(example, generator, donor_bank, rng, special=...)`` masks and replaces both modalities of
one example; ``collate`` pads a batch of them; :class:`ReplacedTokenDetector` is the acoustic
model's encoder with three heads and its loss.
"""

from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from wavern.conditioning.config import EncoderConfig
from wavern.conditioning.encoder import PhonemeEncoder
from wavern.conditioning.frontend.phonemes import SymbolTable
from wavern.dsp import DEFAULT_MEL
from wavern.training.ngram import BidirectionalTrigram

__all__ = ["Example", "special_ids", "pool_frames", "DonorBank", "Corrupted", "choose_positions", "corrupt",
           "collate", "RTDOutput", "RTDLoss", "ReplacedTokenDetector"]


# ----------------------------------------------------------------------------- data
@dataclasses.dataclass(frozen=True)
class Example:
    """One pre-training example (a phoneme sequence, with audio or not).

    Attributes:
        ids: (N,) int64 phoneme ids; is_global: (N,) bool (``corpus_global_mask``).
        audio: (N, n_mels) float32 token-pooled normalised log-mel, or None (text only).
        frames: (N,) int64 frames per token (None when text only).
        voice: index of its espeak voice among the corpus's (-1 when text only).
        utt: index of the utterance in the donor bank (-1 - i for held-out or text-only).
    """

    ids: np.ndarray
    is_global: np.ndarray
    audio: np.ndarray | None = None
    frames: np.ndarray | None = None
    voice: int = -1
    utt: int = -1

    @property
    def bimodal(self) -> bool:
        return self.audio is not None


def special_ids(table: SymbolTable) -> np.ndarray:
    """(V,) bool: ids never masked nor proposed (padding, ``<bos>``, ``<eos>``, ``<unk>``)."""
    s = np.zeros(len(table), bool)
    s[[table.pad_id, table.bos_id, table.eos_id, table.unk_id]] = True
    return s


def pool_frames(mel: np.ndarray, frames: np.ndarray) -> np.ndarray:
    """Mean log-mel frame of each token: (T, M) and (N,) frames (sum T) -> (N, M); 0 for 0 frames."""
    bounds = np.concatenate([[0], np.cumsum(frames)])
    cs = np.concatenate([np.zeros((1, mel.shape[1])), np.cumsum(mel, axis=0, dtype=np.float64)])
    sums = cs[bounds[1:]] - cs[bounds[:-1]]
    return (sums / np.maximum(frames, 1)[:, None]).astype(np.float32)


class DonorBank:
    """Every training token with audio, by phoneme and voice: where replaced frames come from.

    Args:
        seqs: the bimodal training sequences (``utt`` = their index here).
        n_symbols: V; special: (V,) bool ids never used as donors.
    """

    def __init__(self, seqs: list[Example], n_symbols: int, special: np.ndarray) -> None:
        feats, syms, voices, utts = [], [], [], []
        for s in seqs:
            keep = (s.frames > 0) & ~special[s.ids]
            feats.append(s.audio[keep])
            syms.append(s.ids[keep])
            voices.append(np.full(int(keep.sum()), s.voice))
            utts.append(np.full(int(keep.sum()), s.utt))
        n_mels = seqs[0].audio.shape[1] if seqs else DEFAULT_MEL.n_mels
        self.features = np.concatenate(feats) if feats else np.zeros((0, n_mels), np.float32)  # (T, n_mels)
        self.symbol = np.concatenate(syms) if syms else np.zeros(0, np.int64)
        self.voice = np.concatenate(voices) if voices else np.zeros(0, np.int64)
        self.utt = np.concatenate(utts) if utts else np.zeros(0, np.int64)
        order = np.lexsort((self.voice, self.symbol))
        self._by_symbol = _group(self.symbol[order], order)
        self._by_symbol_voice = _group(self.symbol[order] * (1 << 20) + self.voice[order], order)
        self.has_donor = np.zeros(n_symbols, bool)
        self.has_donor[np.unique(self.symbol)] = True

    def draw(self, symbol: int, voice: int, utt: int, rng: np.random.Generator) -> int:
        """A bank index of ``symbol`` from another utterance, same voice if possible; -1 if none."""
        for pool in (self._by_symbol_voice.get(symbol * (1 << 20) + voice), self._by_symbol.get(symbol)):
            if pool is None:
                continue
            j = int(pool[rng.integers(0, pool.size)])
            if self.utt[j] != utt:
                return j
            others = pool[self.utt[pool] != utt]
            if others.size:
                return int(others[rng.integers(0, others.size)])
        return -1


def _group(keys: np.ndarray, values: np.ndarray) -> dict[int, np.ndarray]:
    if keys.size == 0:
        return {}
    cut = np.flatnonzero(np.diff(keys)) + 1
    return {int(k[0]): v for k, v in zip(np.split(keys, cut), np.split(values, cut))}


# ----------------------------------------------------------------------------- corruption
class Corrupted(NamedTuple):
    ids: np.ndarray  # (N,) input ids, text replacements applied
    text_masked: np.ndarray  # (N,) bool
    text_label: np.ndarray  # (N,) float32, 1 = replaced (new id != original)
    audio: np.ndarray | None  # (N, n_mels) pooled features, donors applied (None: text only)
    audio_masked: np.ndarray  # (N,) bool
    audio_label: np.ndarray  # (N,) float32, 1 = frames of another phoneme


def choose_positions(candidates: np.ndarray, rate: float, rng: np.random.Generator) -> np.ndarray:
    """A random subset of the True positions of ``candidates``, of size ``floor(rate n + u)``."""
    idx = np.flatnonzero(candidates)
    k = min(int(math.floor(rate * idx.size + rng.random())), idx.size)
    return np.sort(rng.choice(idx, size=k, replace=False)) if k else np.zeros(0, np.int64)


def corrupt(seq: Example, gen: BidirectionalTrigram, bank: DonorBank | None, rng: np.random.Generator, *,
            special: np.ndarray, mask_rate: float = 0.15, temperature: float = 1.0) -> Corrupted:
    """Mask and replace both modalities of one sequence.

    In each modality ``mask_rate`` of the maskable positions are chosen (a random subset of size
    ``floor(rate n + u)``, ``u`` uniform: the expected rate is exact). Text: every token but padding,
    ``<bos>``, ``<eos>``, ``<unk>``; the trigram ``gen`` proposes from the product of its left and right
    context distributions, with the *original* neighbours as context. Audio: the same positions'
    rule among tokens with frames; the trigram proposes a phoneme that has audio, and the token's
    frames become that phoneme's at a random position of *another* training utterance, of the same
    espeak voice when one has it (``bank``). A position is labelled replaced iff its id (text) or
    proposed phoneme (audio) differs from the original.
    """
    n = seq.ids.size
    real = ~special[seq.ids]
    t_pos = choose_positions(real, mask_rate, rng)
    ids = seq.ids.copy()
    text_masked = np.zeros(n, bool)
    text_masked[t_pos] = True
    if t_pos.size:
        new = gen.sample(seq.ids, t_pos, rng, temperature=temperature)
        ids[t_pos] = np.where(new >= 0, new, seq.ids[t_pos])
    text_label = (ids != seq.ids).astype(np.float32)
    audio_masked = np.zeros(n, bool)
    audio_label = np.zeros(n, np.float32)
    audio = None
    if seq.bimodal:
        audio = seq.audio.copy()
        a_pos = choose_positions(real & (seq.frames > 0), mask_rate, rng) if bank is not None else np.zeros(0, int)
        audio_masked[a_pos] = True
        if a_pos.size:
            proposed = gen.sample(seq.ids, a_pos, rng, restrict=bank.has_donor, temperature=temperature)
            for p, sym in zip(a_pos.tolist(), proposed.tolist()):
                donor = bank.draw(sym, seq.voice, seq.utt, rng) if sym >= 0 else -1
                if donor < 0:
                    continue  # nothing to swap in: the position keeps its own frames
                audio[p] = bank.features[donor]
                audio_label[p] = float(sym != seq.ids[p])
    return Corrupted(ids, text_masked, text_label, audio, audio_masked, audio_label)


def collate(seqs: list[Example], rows: list[Corrupted], n_mels: int,
            device: torch.device | str = "cpu") -> dict[str, torch.Tensor]:
    """Pad a batch: ids/is_global/padding_mask (B, N), audio (B, N, n_mels + 1), has_audio (B,),
    text_label/audio_label (B, N) float, mlm_target (B, N) int64 (-100 = no target)."""
    b, n = len(seqs), max(s.ids.size for s in seqs)
    t = {"ids": np.zeros((b, n), np.int64), "is_global": np.zeros((b, n), bool),
         "padding_mask": np.ones((b, n), bool), "audio": np.zeros((b, n, n_mels + 1), np.float32),
         "has_audio": np.zeros(b, bool), "text_label": np.zeros((b, n), np.float32),
         "audio_label": np.zeros((b, n), np.float32), "mlm_target": np.full((b, n), -100, np.int64)}
    for k, (s, r) in enumerate(zip(seqs, rows)):
        m = s.ids.size
        t["ids"][k, :m], t["is_global"][k, :m], t["padding_mask"][k, :m] = r.ids, s.is_global, False
        t["text_label"][k, :m] = r.text_label
        if r.audio is not None:
            t["has_audio"][k] = True
            t["audio"][k, :m, :n_mels] = r.audio
            t["audio"][k, :m, n_mels] = np.log1p(s.frames)
            t["audio_label"][k, :m] = r.audio_label
            t["mlm_target"][k, :m] = np.where(r.text_masked, s.ids, -100)
    return {k: torch.from_numpy(v).to(device) for k, v in t.items()}


# ----------------------------------------------------------------------------- the model
class RTDOutput(NamedTuple):
    text_logits: torch.Tensor  # (B, N) replaced-text logit
    audio_logits: torch.Tensor  # (B, N) replaced-audio logit
    mlm_logits: torch.Tensor  # (B, N, n_symbols)


class RTDLoss(NamedTuple):
    total: torch.Tensor
    text_rtd: torch.Tensor  # mean BCE over real tokens
    audio_rtd: torch.Tensor  # mean BCE over real tokens of bimodal rows (0 without any)
    mlm: torch.Tensor  # mean CE at text-masked positions of bimodal rows (0 without any)


class ReplacedTokenDetector(nn.Module):
    """The discriminator: a :class:`PhonemeEncoder` (the acoustic model's, so its weights load into
    :class:`AcousticModel` unchanged) plus three heads on its output (B, N, D): text RTD and audio RTD
    (``Linear(D, 1)``, binary cross-entropy over the real tokens, of the bimodal rows for audio) and a
    masked LM (``Linear(D, n_symbols)``, cross-entropy for the original phoneme at the text-masked
    positions of the bimodal rows). Bimodal rows add one vector per token to the phoneme embedding:
    ``Linear([mean of the token's normalised log-mel frames, log(1 + frames)])``; unimodal rows add
    nothing, exactly the input the acoustic model's encoder sees.

    Args:
        encoder: the encoder's config (equal to the acoustic model's ``config.encoder``).
        n_mels: mel bins of the pooled audio features.
    """

    def __init__(self, encoder: EncoderConfig, *, n_mels: int = DEFAULT_MEL.n_mels) -> None:
        super().__init__()
        d = encoder.d_model
        self.n_mels = n_mels
        self.encoder = PhonemeEncoder(encoder)
        self.audio_in = nn.Linear(n_mels + 1, d)  # [pooled normalised log-mel, log(1 + frames)] -> D
        self.text_head = nn.Linear(d, 1)
        self.audio_head = nn.Linear(d, 1)
        self.mlm_head = nn.Linear(d, encoder.n_symbols)

    def forward(self, ids: torch.Tensor, is_global: torch.Tensor, padding_mask: torch.Tensor | None = None, *,
                audio: torch.Tensor | None = None, has_audio: torch.Tensor | None = None) -> RTDOutput:
        """Args: ids, is_global, padding_mask (B, N); audio (B, N, n_mels + 1); has_audio (B,) bool."""
        extra = None
        if audio is not None:
            extra = self.audio_in(audio)  # (B, N, D)
            if has_audio is not None:
                extra = extra * has_audio.to(extra.dtype)[:, None, None]  # text-only rows: nothing added
        h = self._encode(ids, is_global, padding_mask, extra)  # (B, N, D)
        return RTDOutput(self.text_head(h).squeeze(-1), self.audio_head(h).squeeze(-1), self.mlm_head(h))

    def _encode(self, ids, is_global, padding_mask, extra: torch.Tensor | None) -> torch.Tensor:
        if extra is None:
            return self.encoder(ids, is_global, padding_mask)
        # The audio joins the phoneme embedding inside the encoder's own forward (a hook on
        # its embedding for this one call), so the encoder's code and weight names stay the
        # acoustic model's.
        handle = self.encoder.embed.register_forward_hook(lambda module, inputs, output: output + extra)
        try:
            return self.encoder(ids, is_global, padding_mask)
        finally:
            handle.remove()

    @staticmethod
    def loss(out: RTDOutput, batch: dict[str, torch.Tensor], *, text_weight: float = 1.0, audio_weight: float = 1.0,
             mlm_weight: float = 1.0) -> RTDLoss:
        real = (~batch["padding_mask"]).to(out.text_logits.dtype)  # (B, N)
        text = (F.binary_cross_entropy_with_logits(out.text_logits, batch["text_label"], reduction="none")
                * real).sum() / real.sum().clamp_min(1.0)
        areal = real * batch["has_audio"].to(real.dtype)[:, None]
        audio = (F.binary_cross_entropy_with_logits(out.audio_logits, batch["audio_label"], reduction="none")
                 * areal).sum() / areal.sum().clamp_min(1.0)
        target = batch["mlm_target"]
        n_mlm = (target >= 0).sum()
        mlm = (F.cross_entropy(out.mlm_logits.transpose(1, 2), target, ignore_index=-100, reduction="sum")
               / n_mlm.clamp_min(1).to(real.dtype))
        total = text_weight * text + audio_weight * audio + mlm_weight * mlm
        return RTDLoss(total, text, audio, mlm)


