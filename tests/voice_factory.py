"""Tiny voices built inside tests: random (or briefly trained) models in a real voice folder."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch


def make_tiny_voice(out: Path, *, seed: int = 0, hidden_size: int = 64, density: float = 0.5,
                    name: str = "testvoice", lpc_order: int = 0, excitation: str = "linear",
                    ltp: bool = False, ltp_input: bool = False, prosody: bool = False,
                    speakers: tuple[str, ...] = ("en-us",)) -> Path:
    """A voice folder with a randomly initialised tiny acoustic model and a block-pruned WaveRNN.

    ``ltp``: the acoustic model predicts pitch features and the vocoder (mu-law LPC) reads them,
    with a long-term predictor; its pitch projection is biased towards a 110 Hz, periodic voice.
    ``ltp_input``: its GRU also reads the residual one period back.
    ``prosody``: the acoustic model reads (rate, pitch, pitch range), through random weights.
    """
    from wavern.conditioning.acoustic import AcousticModel
    from wavern.conditioning.config import AcousticConfig, EncoderConfig
    from wavern.conditioning.frontend.phonemes import SymbolTable
    from wavern.training.voice import assemble_voice
    from wavern.vocoder.config import VocoderConfig
    from wavern.vocoder.model import WaveRNN
    from wavern.vocoder.pruning import block_mask

    torch.manual_seed(seed)
    table = SymbolTable.default()
    acfg = AcousticConfig(
        encoder=EncoderConfig(n_symbols=len(table), d_model=32, n_layers=1, n_heads=2, window=8, ffn_channels=32),
        decoder_layers=1, decoder_d_model=32, decoder_heads=2, decoder_ffn_channels=32, duration_channels=16,
        speaker_dim=8, ref_channels=8, peer_width=8, pitch=ltp, prosody=prosody, speakers=speakers)
    acoustic = AcousticModel(acfg).eval()
    if prosody:
        with torch.no_grad():
            acoustic.prosody_in.weight.normal_()
    if ltp:
        with torch.no_grad():
            acoustic.pitch_out.weight.mul_(0.1)
            acoustic.pitch_out.bias.copy_(torch.tensor([np.log2(110 / 120), 0.95]))
    vcfg = VocoderConfig(hidden_size=hidden_size, cond_channels=16, cond_blocks=1, lpc_order=lpc_order,
                         lpc_prediction_input=False, excitation=excitation, pitch=ltp, ltp=ltp,
                         ltp_input=ltp_input)
    vocoder = WaveRNN(vcfg)
    with torch.no_grad():
        w = vocoder.gru.weight_hh_l0
        w.mul_(block_mask(w, vcfg.block_shape, 1 - density).to(w.dtype))
    assemble_voice(out, acoustic=acoustic, vocoder=vocoder, symbols=table.to_list(), name=name,
                   provenance={"test": True}, card=f"# {name}\n\nRandom weights, for tests.\n")
    return out


def voice_with_inference(voice: Path, out: Path, **inference) -> Path:
    """A copy of the voice folder ``voice`` at ``out`` with ``inference`` entries set in its voice.json."""
    import json
    import shutil

    shutil.copytree(voice, out)
    meta = json.loads((out / "voice.json").read_text())
    meta["inference"].update(inference)
    (out / "voice.json").write_text(json.dumps(meta))
    return out
