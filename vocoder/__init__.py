"""wavern.vocoder: the WaveRNN in torch (training form, reference loop), block pruning, export.

``wavern.vocoder.format`` is numpy-only and is what the engine imports; importing it must not
pull in torch, so the torch-side names below are loaded lazily on first access.
"""

from __future__ import annotations

import importlib

__all__ = ["VocoderConfig", "WaveRNN", "VocoderLoss", "InferResult", "BlockPruner", "sparsity_at",
           "export_vocoder", "load_vocoder", "gru_sequence"]

_LAZY = {
    "VocoderConfig": "wavern.vocoder.config",
    "WaveRNN": "wavern.vocoder.model",
    "VocoderLoss": "wavern.vocoder.model",
    "InferResult": "wavern.vocoder.model",
    "BlockPruner": "wavern.vocoder.pruning",
    "sparsity_at": "wavern.vocoder.pruning",
    "export_vocoder": "wavern.vocoder.export",
    "load_vocoder": "wavern.vocoder.export",
    "gru_sequence": "wavern.vocoder.gru",
}


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'wavern.vocoder' has no attribute {name!r}")
