"""Export to the engine's file format and loading back, with validation of every tensor."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from wavern.dsp import MelConfig
from wavern.errors import VoiceFileError
from wavern.vocoder.config import VocoderConfig
from wavern.vocoder.export import export_vocoder, load_vocoder
from wavern.vocoder.format import load_vocoder_tensors, save_vocoder_tensors
from wavern.vocoder.model import WaveRNN
from wavern.vocoder.pruning import BlockPruner

torch.set_num_threads(1)

CFG = VocoderConfig(hidden_size=64, cond_channels=8, cond_blocks=2, mel=MelConfig(hop_length=16))


def _pruned_model(cfg: VocoderConfig = CFG, sparsity: float = 0.75) -> WaveRNN:
    torch.manual_seed(0)
    m = WaveRNN(cfg)
    pruner = BlockPruner(m, cfg)
    pruner.update_masks(sparsity)
    pruner.apply()
    return m


def test_round_trip_float32_is_exact_and_keeps_density(tmp_path):
    m = _pruned_model()
    path = tmp_path / "vocoder.safetensors"
    export_vocoder(m, path, dtype=np.float32)
    back = load_vocoder(path, CFG)
    for k, v in m.state_dict().items():
        assert torch.equal(back.state_dict()[k], v), k
    _, sparse = load_vocoder_tensors(path, cond_blocks=CFG.cond_blocks)
    assert sparse["gru.weight_hh"].density == pytest.approx(0.25)
    assert sparse["O4"].block_shape == (16, 4)
    # Same samples from the reference loop.
    mel = torch.randn(2, 80)
    u = np.random.default_rng(0).random((32, 2))
    assert torch.equal(m.infer(mel, u), back.infer(mel, u))


def test_round_trip_float16_rounds_only(tmp_path):
    m = _pruned_model()
    path = tmp_path / "vocoder.safetensors"
    export_vocoder(m, path)  # float16 by default
    back = load_vocoder(path, CFG)
    for k, v in m.state_dict().items():
        expect = v.half().float()
        assert torch.equal(back.state_dict()[k], expect), k


def test_a_weight_too_large_for_float16_is_refused_at_export_not_at_load(tmp_path):
    from wavern.errors import ParameterError

    m = _pruned_model()
    with torch.no_grad():
        m.O2.bias[3] = 1e5  # float16 tops out at 65504
    path = tmp_path / "vocoder.safetensors"
    with pytest.raises(ParameterError, match=r"O2.bias: a weight of magnitude 1e\+05 does not fit float16"):
        export_vocoder(m, path)
    assert not path.exists()
    export_vocoder(m, path, dtype=np.float32)  # float32 holds it
    assert load_vocoder(path, CFG).O2.bias[3] == 1e5
    with torch.no_grad():
        m.O2.bias[3] = float("nan")
    with pytest.raises(ParameterError, match="O2.bias holds NaN"):
        export_vocoder(m, tmp_path / "nan.safetensors", dtype=np.float32)


def test_config_mismatch_names_the_tensor(tmp_path):
    path = tmp_path / "vocoder.safetensors"
    export_vocoder(_pruned_model(), path)
    with pytest.raises(VoiceFileError, match="cond.conv_in.weight"):
        load_vocoder(path, VocoderConfig(hidden_size=64, cond_channels=16, cond_blocks=2,
                                         mel=MelConfig(hop_length=16)))
    with pytest.raises(VoiceFileError, match="gru.weight_ih.*hidden_size=96"):
        load_vocoder(path, VocoderConfig(hidden_size=96, cond_channels=8, cond_blocks=2,
                                         mel=MelConfig(hop_length=16)))
    with pytest.raises(VoiceFileError, match="block shape"):
        load_vocoder(path, VocoderConfig(hidden_size=64, cond_channels=8, cond_blocks=2, block_rows=4,
                                         mel=MelConfig(hop_length=16)))
    with pytest.raises(VoiceFileError, match="cond.blocks.2"):
        load_vocoder(path, VocoderConfig(hidden_size=64, cond_channels=8, cond_blocks=3,
                                         mel=MelConfig(hop_length=16)))


def test_corrupt_and_truncated_files(tmp_path):
    path = tmp_path / "vocoder.safetensors"
    export_vocoder(_pruned_model(), path)
    raw = path.read_bytes()
    (tmp_path / "trunc.safetensors").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(VoiceFileError):
        load_vocoder(tmp_path / "trunc.safetensors", CFG)
    (tmp_path / "junk.safetensors").write_bytes(b"\x00" * 64)
    with pytest.raises(VoiceFileError):
        load_vocoder(tmp_path / "junk.safetensors", CFG)
    with pytest.raises(VoiceFileError, match="not found"):
        load_vocoder(tmp_path / "missing.safetensors", CFG)


def test_nonzero_masked_input_weight_is_refused(tmp_path):
    path = tmp_path / "vocoder.safetensors"
    export_vocoder(_pruned_model(), path, dtype=np.float32)
    dense, sparse = load_vocoder_tensors(path, cond_blocks=CFG.cond_blocks)
    dense["gru.weight_ih"][0, 2] = 0.5  # the coarse r row sees c_t: forbidden
    save_vocoder_tensors(path, dense, sparse, dtype=np.float32)
    with pytest.raises(VoiceFileError, match="coarse"):
        load_vocoder(path, CFG)


def test_format_module_does_not_import_torch():
    """The engine imports wavern.vocoder.format; the package must not drag torch in with it."""
    import subprocess
    import sys

    code = "import sys, wavern.vocoder.format; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
