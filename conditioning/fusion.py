"""Peer-attention fusion of the text stream with the speaker/style stream (REFERENCES §4).

AssembleNet++ (Ryoo et al., 2020), as the authors' code computes it, per block with several
input connections ``j`` and candidate peers ``k``:

- edge gate: every input is scaled by ``sigmoid(w_j)`` (independent gates, ``w_j`` starts at 0,
  i.e. a gate of 0.5);
- peer vectors: ``a_k = Linear_k(GAP(X_k))``, projected to a common width ``peer_width``;
- per connection, ``a = sum_k softmax(pi_j)_k a_k`` and the channel-wise attention
  ``Y_j <- Y_j * sigmoid(Linear_j(a))``;
- the gated, attended inputs are projected to the block's width (1x1, where the channel
  counts differ) and summed.

:meth:`PeerFusion.prune` turns the soft model into the pruned one: each connection keeps only
its argmax peer, and an edge whose gate ``sigmoid(w_j)`` is below ``gate_threshold`` is dropped
(at least one edge always survives). With a one-hot softmax and no weak edge the pruned and the
soft model compute the same thing; the tests check exactly that.

In wavern the inputs are the text stream (per token or per frame) and the utterance-level
speaker/style vectors (a learned speaker embedding, and a reference encoder over the mel frames
of a reference clip), broadcast along time.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import torch
from torch import nn

from wavern.errors import ParameterError

__all__ = ["PeerFusion", "ReferenceEncoder", "masked_mean"]

log = logging.getLogger(__name__)


def masked_mean(x: torch.Tensor, padding_mask: torch.Tensor | None) -> torch.Tensor:
    """Global average pool over time that ignores padding.

    Args:
        x: (B, L, C).
        padding_mask: (B, L) bool, True at padding; None means no padding.

    Returns:
        (B, C); a row that is all padding pools to 0.
    """
    if padding_mask is None:
        return x.mean(dim=1)
    keep = (~padding_mask).to(x.dtype).unsqueeze(-1)  # (B, L, 1)
    return (x * keep).sum(dim=1) / keep.sum(dim=1).clamp_min(1.0)


class PeerFusion(nn.Module):
    """The input fusion of one block: gated, peer-attended connections summed to ``out_channels``.

    Args:
        in_channels: channel count ``C_j`` of every input connection.
        peer_channels: channel count of every candidate peer's pooled vector.
        out_channels: the block's width.
        peer_width: the common width of the peer vectors ``a_k``.
        gate_threshold: :meth:`prune` drops an edge whose ``sigmoid(w_j)`` is below this.
        names, peer_names: labels for :meth:`connection_table` (default ``in0, in1, ...``).
    """

    def __init__(self, in_channels: Sequence[int], peer_channels: Sequence[int], out_channels: int, *,
                 peer_width: int, gate_threshold: float = 0.05, names: Sequence[str] | None = None,
                 peer_names: Sequence[str] | None = None) -> None:
        super().__init__()
        if not in_channels or not peer_channels:
            raise ParameterError(f"peer fusion needs at least one input and one peer, found "
                                 f"{len(in_channels)} inputs and {len(peer_channels)} peers")
        self.in_channels = tuple(int(c) for c in in_channels)
        self.peer_channels = tuple(int(c) for c in peer_channels)
        self.out_channels = int(out_channels)
        self.gate_threshold = float(gate_threshold)
        self.names = tuple(names) if names is not None else tuple(f"in{j}" for j in range(len(in_channels)))
        self.peer_names = (tuple(peer_names) if peer_names is not None
                           else tuple(f"peer{k}" for k in range(len(peer_channels))))
        if len(self.names) != len(self.in_channels) or len(self.peer_names) != len(self.peer_channels):
            raise ParameterError("names and peer_names must match the number of inputs and peers")
        n_in, n_peer = len(self.in_channels), len(self.peer_channels)
        self.edge_logit = nn.Parameter(torch.zeros(n_in))  # w_j: sigmoid(0) = 0.5
        self.peer_logit = nn.Parameter(torch.zeros(n_in, n_peer))  # pi_j: uniform over peers at first
        self.peer_proj = nn.ModuleList(nn.Linear(c, peer_width) for c in self.peer_channels)  # Linear_k
        self.attend = nn.ModuleList(nn.Linear(peer_width, c) for c in self.in_channels)  # Linear_j
        self.in_proj = nn.ModuleList(
            nn.Identity() if c == out_channels else nn.Linear(c, out_channels, bias=False) for c in self.in_channels)
        # Pruned structure (exported with the weights): -1 = soft mixture, else the kept peer.
        self.register_buffer("peer_choice", torch.full((n_in,), -1, dtype=torch.int64))
        self.register_buffer("edge_alive", torch.ones(n_in))

    @property
    def pruned(self) -> bool:
        return bool((self.peer_choice >= 0).any()) or bool((self.edge_alive == 0).any())

    def gates(self) -> torch.Tensor:
        """(n_in,) edge gates ``sigmoid(w_j)``, zero for a pruned edge."""
        return torch.sigmoid(self.edge_logit) * self.edge_alive

    def peer_weights(self) -> torch.Tensor:
        """(n_in, n_peers) mixing weights: ``softmax(pi_j)``, or one-hot where pruned."""
        soft = torch.softmax(self.peer_logit, dim=-1)
        hard = torch.nn.functional.one_hot(self.peer_choice.clamp_min(0), soft.shape[1]).to(soft.dtype)
        return torch.where((self.peer_choice >= 0).unsqueeze(-1), hard, soft)

    def forward(self, inputs: Sequence[torch.Tensor], peers: Sequence[torch.Tensor]) -> torch.Tensor:
        """Fuse the inputs.

        Args:
            inputs: one tensor per connection, (B, L, C_j) or (B, 1, C_j) (broadcast along L).
            peers: one pooled vector per peer, (B, P_k).

        Returns:
            (B, L, out_channels), L the longest input's length.
        """
        if len(inputs) != len(self.in_channels) or len(peers) != len(self.peer_channels):
            raise ParameterError(f"expected {len(self.in_channels)} inputs and {len(self.peer_channels)} peers, "
                                 f"found {len(inputs)} and {len(peers)}")
        choice = self.peer_choice.tolist()
        alive = self.edge_alive.tolist()
        if any(c < 0 for c, on in zip(choice, alive) if on):
            needed = set(range(len(peers)))  # a soft connection mixes every peer
        else:
            needed = {c for c, on in zip(choice, alive) if on}
        a_k = {k: self.peer_proj[k](peers[k]) for k in sorted(needed)}  # each (B, peer_width)
        mix = torch.softmax(self.peer_logit, dim=-1)  # (n_in, n_peers)
        gate = torch.sigmoid(self.edge_logit)
        out = None
        for j, y in enumerate(inputs):
            if not alive[j]:
                continue  # pruned edge: contributes nothing
            if choice[j] >= 0:
                a = a_k[choice[j]]  # pruned: the argmax peer alone
            else:
                a = sum(mix[j, k] * a_k[k] for k in range(len(peers)))  # (B, peer_width)
            att = torch.sigmoid(self.attend[j](a)).unsqueeze(1)  # (B, 1, C_j)
            term = self.in_proj[j](gate[j] * y * att)  # (B, L_j, out)
            out = term if out is None else out + term  # L_j = 1 broadcasts along L
        length = max(y.shape[1] for y in inputs)  # (pruning may have kept only broadcast inputs)
        return out if out.shape[1] == length else out.expand(-1, length, -1)

    @torch.no_grad()
    def prune(self, *, gate_threshold: float | None = None) -> dict:
        """Keep each connection's argmax peer and drop edges with ``sigmoid(w_j) < gate_threshold``.

        The edge with the largest gate is never dropped. Returns what was kept, for logs.
        """
        thr = self.gate_threshold if gate_threshold is None else float(gate_threshold)
        if not 0.0 < thr < 1.0:
            raise ParameterError(f"gate_threshold must be in (0, 1), found {thr}")
        gate = torch.sigmoid(self.edge_logit)
        self.peer_choice.copy_(self.peer_logit.argmax(dim=-1))
        alive = (gate >= thr).to(self.edge_alive.dtype) * self.edge_alive
        if not bool(alive.any()):
            alive[int(torch.argmax(gate * self.edge_alive + (self.edge_alive - 1)))] = 1.0
        self.edge_alive.copy_(alive)
        kept = {self.names[j]: (self.peer_names[int(self.peer_choice[j])] if alive[j] else None)
                for j in range(len(self.names))}
        log.info("peer fusion pruned (gate threshold %.3g): %s", thr, kept)
        return kept

    @torch.no_grad()
    def connection_table(self) -> list[dict]:
        """One row per connection: its gate and its weight on every peer (for docs and logs)."""
        gates, weights = self.gates(), self.peer_weights()
        return [{"input": self.names[j], "gate": float(gates[j]),
                 "peers": {self.peer_names[k]: float(weights[j, k]) for k in range(len(self.peer_names))}}
                for j in range(len(self.names))]


class ReferenceEncoder(nn.Module):
    """Style from a reference clip: k=3 convolutions over its log-mel frames, then a masked mean.

    Args:
        n_mels: mel bins of the input.
        channels: output width R.
        n_layers: number of conv layers (>= 1).
    """

    def __init__(self, n_mels: int, channels: int, n_layers: int) -> None:
        super().__init__()
        self.convs = nn.ModuleList(
            nn.Conv1d(n_mels if i == 0 else channels, channels, 3, padding=1) for i in range(n_layers))
        self.norm = nn.LayerNorm(channels)
        # Stand-in for "no reference clip": learned, so a voice without a clip still has a style.
        self.null = nn.Parameter(torch.zeros(channels))

    def forward(self, mel: torch.Tensor | None, padding_mask: torch.Tensor | None = None, *,
                batch_size: int | None = None, present: torch.Tensor | None = None) -> torch.Tensor:
        """Pooled style vector.

        Args:
            mel: (B, T, n_mels) reference log-mel, or None for "no reference".
            padding_mask: (B, T) bool, True at padding frames.
            batch_size: B when ``mel`` is None.
            present: (B,) bool; rows marked False get the "no reference" vector (the trainer
                drops references at random so that both uses are learned).

        Returns:
            (B, R).
        """
        if mel is None:
            if batch_size is None:
                raise ParameterError("batch_size is required when no reference mel is given")
            return self.null.unsqueeze(0).expand(batch_size, -1)
        keep = None if padding_mask is None else (~padding_mask).to(mel.dtype).unsqueeze(1)  # (B, 1, T)
        x = mel.transpose(1, 2)  # (B, n_mels, T)
        for conv in self.convs:
            if keep is not None:
                x = x * keep  # padding never leaks into real frames through the kernel
            x = torch.relu(conv(x))
        x = self.norm(x.transpose(1, 2))  # (B, T, R)
        pooled = masked_mean(x, padding_mask)
        if present is not None:
            pooled = torch.where(present.unsqueeze(-1), pooled, self.null.unsqueeze(0))
        return pooled
