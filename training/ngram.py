"""A bidirectional phoneme trigram: the text generator of replaced-token detection (REFERENCES §6).

CodeBERT's generators are n-gram language models trained beforehand on unimodal data; this is
that, over phoneme ids. One table of trigram counts ``C[a, b, c]`` over every sequence padded
with two boundary symbols on each side (``[0, 0, x_0 .. x_{n-1}, 0, 0]``; id 0 is the padding
id of the symbol table) gives both directions:

    forward   P_f(x | a, b) = (C[a, b, x] + k) / (C[a, b, .] + k V)     (left context a b)
    backward  P_b(x | b, c) = (C[x, b, c] + k) / (C[., b, c] + k V)     (right context b c)

(add-k smoothing; V = ``n_symbols``, the boundary symbol included, so each sums to 1 over x).

**Proposal at position i.** A product of experts, restricted to plausible symbols:

    q(x) ∝ P_f(x | x_{i-2}, x_{i-1}) · P_b(x | x_{i+1}, x_{i+2}) · [x ∈ S_i]

The product (not the mixture) is chosen because a replacement should fit *both* sides, as the
original does; a mixture would often propose a symbol that only fits one neighbour, which the
discriminator then spots from the other side alone. ``S_i`` keeps every proposal plausible,
backing off only when empty:

1. symbols seen in training *between* the two neighbours: ``C[x_{i-1}, x, .] > 0`` with
   ``x_{i+1}`` following, i.e. the trigram ``(x_{i-1}, x, x_{i+1})`` was seen;
2. else symbols seen right after ``x_{i-1}`` or right before ``x_{i+1}``;
3. else every symbol seen in training.

Symbols in ``exclude`` (padding, ``<bos>``, ``<eos>``, ``<unk>``) are never proposed. For a
sequence from the training data the original symbol is always in tier 1, so the proposal can
equal the original (the caller labels such a position "original", as ELECTRA does).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

import numpy as np

from wavern.errors import ParameterError

__all__ = ["BidirectionalTrigram", "BOUNDARY"]

log = logging.getLogger(__name__)

BOUNDARY = 0  # the padding id stands for "before the start / after the end"


class BidirectionalTrigram:
    """Forward and backward add-k trigram over phoneme ids, sharing one count table.

    Build with :meth:`fit`. Counts are kept sparse (sorted int64 keys ``(a V + b) V + c``), so a
    large symbol table costs nothing for the trigrams never seen.

    Args:
        n_symbols: V, the size of the symbol table (ids in ``[0, V)``).
        keys: (T,) sorted unique int64 trigram keys; counts: (T,) int64 counts.
        k: add-k smoothing constant (> 0).
        exclude: ids never proposed as replacements.
    """

    def __init__(self, n_symbols: int, keys: np.ndarray, counts: np.ndarray, *, k: float,
                 exclude: Iterable[int] = ()) -> None:
        if n_symbols < 2:
            raise ParameterError(f"n_symbols must be >= 2, found {n_symbols}")
        if not k > 0:
            raise ParameterError(f"add-k smoothing needs k > 0, found {k}")
        self.n_symbols = int(n_symbols)
        self.k = float(k)
        self.keys = np.asarray(keys, np.int64)
        self.counts = np.asarray(counts, np.int64)
        v = self.n_symbols
        a, rest = np.divmod(self.keys, v * v)
        b, c = np.divmod(rest, v)
        self.left = np.zeros((v, v), np.int64)  # C[a, b, .]: trigrams starting with (a, b)
        np.add.at(self.left, (a, b), self.counts)
        self.right = np.zeros((v, v), np.int64)  # C[., b, c]: trigrams ending with (b, c)
        np.add.at(self.right, (b, c), self.counts)
        self.unigram = self.left.sum(axis=0)  # occurrences of each symbol (as the b of some (a, b))
        self.allowed = np.ones(v, bool)
        for e in exclude:
            if not 0 <= int(e) < v:
                raise ParameterError(f"excluded id {e} is outside [0, {v})")
            self.allowed[int(e)] = False
        self.allowed[BOUNDARY] = False

    # ------------------------------------------------------------------ building
    @classmethod
    def fit(cls, sequences: Iterable[np.ndarray], *, n_symbols: int, k: float = 0.01,
            exclude: Iterable[int] = ()) -> "BidirectionalTrigram":
        """Count the trigrams of ``sequences`` (each (N,) int ids in ``[1, n_symbols)``)."""
        v = int(n_symbols)
        chunks = []
        n_seq = 0
        for seq in sequences:
            s = np.asarray(seq, np.int64)
            if s.ndim != 1:
                raise ParameterError(f"a sequence must be 1-D ids, found shape {s.shape}")
            if s.size and (s.min() < 1 or s.max() >= v):
                raise ParameterError(f"ids must lie in [1, {v}) (0 is the boundary), found "
                                     f"[{int(s.min())}, {int(s.max())}]")
            p = np.concatenate([[BOUNDARY, BOUNDARY], s, [BOUNDARY, BOUNDARY]])
            chunks.append((p[:-2] * v + p[1:-1]) * v + p[2:])
            n_seq += 1
        if not chunks:
            raise ParameterError("cannot fit an n-gram model on no sequences")
        keys, counts = np.unique(np.concatenate(chunks), return_counts=True)
        log.info("trigram model: %d sequences, %d distinct trigrams over %d symbols", n_seq, keys.size, v)
        return cls(v, keys, counts.astype(np.int64), k=k, exclude=exclude)

    def count(self, a, b, c) -> np.ndarray:
        """``C[a, b, c]`` for broadcastable integer arrays (0 where never seen)."""
        a, b, c = np.broadcast_arrays(np.asarray(a, np.int64), np.asarray(b, np.int64), np.asarray(c, np.int64))
        q = (a * self.n_symbols + b) * self.n_symbols + c
        pos = np.searchsorted(self.keys, q).clip(max=self.keys.size - 1)  # fit() leaves >= 2 keys
        return np.where(self.keys[pos] == q, self.counts[pos], 0)

    # ------------------------------------------------------------------ probabilities
    def forward_prob(self, a, b) -> np.ndarray:
        """``P_f(x | a, b)`` for every x: (..., V) for (...) contexts."""
        a, b = np.broadcast_arrays(np.asarray(a, np.int64), np.asarray(b, np.int64))
        x = np.arange(self.n_symbols)
        num = self.count(a[..., None], b[..., None], x) + self.k
        return num / (self.left[a, b] + self.k * self.n_symbols)[..., None]

    def backward_prob(self, b, c) -> np.ndarray:
        """``P_b(x | b, c)`` for every x (x followed by b, then c): (..., V)."""
        b, c = np.broadcast_arrays(np.asarray(b, np.int64), np.asarray(c, np.int64))
        x = np.arange(self.n_symbols)
        num = self.count(x, b[..., None], c[..., None]) + self.k
        return num / (self.right[b, c] + self.k * self.n_symbols)[..., None]

    def _context(self, seq: np.ndarray, positions: np.ndarray) -> tuple[np.ndarray, ...]:
        p = np.concatenate([[BOUNDARY, BOUNDARY], seq, [BOUNDARY, BOUNDARY]])
        i = positions + 2
        return p[i - 2], p[i - 1], p[i + 1], p[i + 2]

    def support(self, seq, positions) -> np.ndarray:
        """The plausible set ``S_i`` (see the module docstring): (M, V) bool for M positions."""
        seq = np.asarray(seq, np.int64)
        positions = np.asarray(positions, np.int64)
        _, l1, r1, _ = self._context(seq, positions)
        x = np.arange(self.n_symbols)
        tier1 = (self.count(l1[:, None], x, r1[:, None]) > 0) & self.allowed
        tier2 = ((self.left[l1, :] > 0) | (self.right[:, r1].T > 0)) & self.allowed  # (x after l1) | (x before r1)
        tier3 = np.broadcast_to((self.unigram > 0) & self.allowed, tier1.shape)
        empty1 = ~tier1.any(axis=1, keepdims=True)
        empty2 = ~tier2.any(axis=1, keepdims=True)
        return np.where(empty1, np.where(empty2, tier3, tier2), tier1)

    def proposal(self, seq, positions, *, restrict: np.ndarray | None = None) -> np.ndarray:
        """Normalised proposal ``q`` at each position: (M, V) float64 rows summing to 1.

        Args:
            seq: (N,) ids, the context (the original sequence).
            positions: (M,) indices into ``seq``.
            restrict: optional (V,) bool: only these symbols (e.g. those with audio donors);
                a row left empty by it is all zeros.
        """
        seq = np.asarray(seq, np.int64)
        positions = np.asarray(positions, np.int64)
        if positions.size and (positions.min() < 0 or positions.max() >= seq.size):
            raise ParameterError(f"positions must lie in [0, {seq.size}), found {positions.min()}..{positions.max()}")
        l2, l1, r1, r2 = self._context(seq, positions)
        q = self.forward_prob(l2, l1) * self.backward_prob(r1, r2) * self.support(seq, positions)
        if restrict is not None:
            q = q * np.asarray(restrict, bool)
        total = q.sum(axis=1, keepdims=True)
        return np.divide(q, total, out=np.zeros_like(q), where=total > 0)

    def sample(self, seq, positions, rng: np.random.Generator, *, restrict: np.ndarray | None = None,
               temperature: float = 1.0) -> np.ndarray:
        """Draw one replacement per position from ``q ** (1 / temperature)``.

        Returns:
            (M,) int64 ids; -1 where ``restrict`` left nothing to draw from.
        """
        if not temperature > 0:
            raise ParameterError(f"temperature must be > 0, found {temperature}")
        q = self.proposal(seq, positions, restrict=restrict)
        if temperature != 1.0:
            q = q ** (1.0 / temperature)
        total = q.sum(axis=1)
        u = rng.random(q.shape[0])
        # the first x with cumsum(q)[x] > u * sum(q) (the project's sampling rule)
        idx = (np.cumsum(q, axis=1) <= (u * total)[:, None]).sum(axis=1)
        idx = np.minimum(idx, self.n_symbols - 1)
        return np.where(total > 0, idx, -1).astype(np.int64)
