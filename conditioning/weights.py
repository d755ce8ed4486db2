"""``acoustic.safetensors`` read and checked without torch: the names, shapes and values a voice's
acoustic model file must hold.

The file holds every tensor of :class:`~wavern.conditioning.acoustic.AcousticModel`'s
``state_dict`` under its own name (float16 or float32 for floating tensors; the pruning
buffers ``*.peer_choice`` stay int64), plus string metadata::

    format = "wavern-acoustic", format_version = "1", config = <AcousticConfig.to_dict() as JSON>

:func:`tensor_specs` lists what a config's model holds from the config alone (the tests compare
it with the torch model's ``state_dict``); :func:`read_acoustic` reads a file (safetensors: no
code runs) and refuses, with :class:`VoiceFileError` naming the file and the tensor, anything
missing, extra, misshapen, of the wrong kind, non-finite or unreadable, a config that disagrees
with the file's own, and a config that describes a model far bigger than the file. Both the torch
loader (``export.load_acoustic``) and the numpy runtime (``runtime.load_runtime``) read through it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from wavern.conditioning.config import AcousticConfig
from wavern.errors import ParameterError, VoiceFileError

__all__ = ["FORMAT", "FORMAT_VERSION", "tensor_specs", "read_acoustic"]

FORMAT = "wavern-acoustic"
FORMAT_VERSION = 1
_FLOAT_DTYPES = (np.dtype(np.float16), np.dtype(np.float32))

Specs = dict[str, tuple[tuple[int, ...], bool]]  # name -> (shape, is floating)


def _linear(specs: Specs, name: str, n_in: int, n_out: int, *, bias: bool = True) -> None:
    specs[f"{name}.weight"] = ((n_out, n_in), True)
    if bias:
        specs[f"{name}.bias"] = ((n_out,), True)


def _conv(specs: Specs, name: str, n_in: int, n_out: int, kernel: int) -> None:
    specs[f"{name}.weight"] = ((n_out, n_in, kernel), True)
    specs[f"{name}.bias"] = ((n_out,), True)


def _norm(specs: Specs, name: str, d: int) -> None:
    specs[f"{name}.weight"] = ((d,), True)
    specs[f"{name}.bias"] = ((d,), True)


def _layer(specs: Specs, name: str, d: int, ffn: int, kernel: int, mixer: str) -> None:
    """A PreNormLayer with a ``window`` (Longformer), ``strided`` or ``conv`` mixer."""
    _norm(specs, f"{name}.norm1", d)
    if mixer == "conv":
        _conv(specs, f"{name}.mixer.conv", d, d, 5)
    else:
        prefix = f"{name}.mixer" if mixer == "window" else f"{name}.mixer.attn"
        projections = ("query", "key", "value") + (("query_global", "key_global", "value_global")
                                                  if mixer == "window" else ()) + ("out",)
        for proj in projections:
            _linear(specs, f"{prefix}.{proj}", d, d)
    _norm(specs, f"{name}.norm2", d)
    _conv(specs, f"{name}.ffn.conv1", d, ffn, kernel)
    _conv(specs, f"{name}.ffn.conv2", ffn, d, 1)


def _fusion(specs: Specs, name: str, inputs: tuple[int, ...], peers: tuple[int, ...], out: int, width: int) -> None:
    specs[f"{name}.edge_logit"] = ((len(inputs),), True)
    specs[f"{name}.peer_logit"] = ((len(inputs), len(peers)), True)
    specs[f"{name}.peer_choice"] = ((len(inputs),), False)
    specs[f"{name}.edge_alive"] = ((len(inputs),), True)
    for k, c in enumerate(peers):
        _linear(specs, f"{name}.peer_proj.{k}", c, width)
    for j, c in enumerate(inputs):
        _linear(specs, f"{name}.attend.{j}", width, c)
    for j, c in enumerate(inputs):
        if c != out:
            _linear(specs, f"{name}.in_proj.{j}", c, out, bias=False)


def tensor_specs(config: AcousticConfig) -> Specs:
    """Name -> (shape, is_floating) of every tensor an ``acoustic.safetensors`` for ``config`` holds."""
    enc, d, dd = config.encoder, config.encoder.d_model, config.decoder_d_model
    s, r = config.speaker_dim, config.ref_channels
    specs: Specs = {"mel_mean": ((config.n_mels,), True), "mel_std": ((config.n_mels,), True),
                    "encoder.embed.weight": ((enc.n_symbols, d), True),
                    "encoder.global_embed.weight": ((2, d), True)}
    for i in range(enc.n_layers):
        _layer(specs, f"encoder.layers.{i}", d, enc.ffn_channels, enc.ffn_kernel, "window")
    _norm(specs, "encoder.norm", d)
    specs["speaker_embed.weight"] = ((len(config.speakers), s), True)
    specs["reference.null"] = ((r,), True)
    for i in range(config.ref_layers):
        _conv(specs, f"reference.convs.{i}", config.n_mels if i == 0 else r, r, 3)
    _norm(specs, "reference.norm", r)
    _fusion(specs, "token_fusion", (d, s, r), (d, s, r), d, config.peer_width)
    c, k = config.duration_channels, config.duration_kernel
    _conv(specs, "duration.convs.0", d, c, k)
    _conv(specs, "duration.convs.1", c, c, k)
    _norm(specs, "duration.norms.0", c)
    _norm(specs, "duration.norms.1", c)
    _linear(specs, "duration.proj", c, 1)
    _linear(specs, "frame_in", d, dd)
    _linear(specs, "frame_pos", 2, dd)
    _fusion(specs, "frame_fusion", (dd, s, r), (dd, d, s, r), dd, config.peer_width)
    for i in range(config.decoder_layers):
        _layer(specs, f"decoder.layers.{i}", dd, config.decoder_ffn_channels, config.decoder_ffn_kernel,
               config.decoder_kind)
    _norm(specs, "decoder.norm", dd)
    _linear(specs, "mel_out", dd, config.n_mels)
    if config.pitch:
        _linear(specs, "pitch_out", dd, 2)
    if config.prosody:
        _linear(specs, "prosody_in", 3, s)
    return specs


def _first_difference(a: dict, b: dict, prefix: str = "") -> str | None:
    for key in sorted(set(a) | set(b)):
        if key not in a or key not in b:
            return prefix + key
        if isinstance(a[key], dict) and isinstance(b[key], dict):
            sub = _first_difference(a[key], b[key], prefix + key + ".")
            if sub:
                return sub
        elif a[key] != b[key]:
            return prefix + key
    return None


def read_acoustic(path: str | os.PathLike,
                  config: AcousticConfig | None = None) -> tuple[AcousticConfig, dict[str, np.ndarray]]:
    """Read and check ``acoustic.safetensors``.

    Args:
        path: the file.
        config: the model's config (a voice's ``voice.json["acoustic"]``); None uses the file's own.

    Returns:
        (the config, name -> array): floating tensors as float32, the pruning choices as int64.

    Raises:
        VoiceFileError: missing/corrupt file, wrong format, config mismatch, or any tensor
            missing, extra, misshapen, of the wrong kind, or non-finite.
    """
    from safetensors import SafetensorError, safe_open

    path = Path(path)
    if not path.is_file():
        raise VoiceFileError(f"acoustic model file not found: {path}")
    try:
        with safe_open(str(path), framework="numpy") as f:
            meta = f.metadata() or {}
            tensors = {name: f.get_tensor(name) for name in f.keys()}
    except (SafetensorError, OSError, ValueError, RuntimeError, TypeError) as e:
        raise VoiceFileError(f"{path}: not a readable safetensors file ({e})") from None
    if meta.get("format") != FORMAT:
        raise VoiceFileError(f"{path}: metadata 'format' is {meta.get('format')!r}, expected {FORMAT!r}")
    if meta.get("format_version") != str(FORMAT_VERSION):
        raise VoiceFileError(f"{path}: format_version {meta.get('format_version')!r} is not supported "
                             f"(this wavern reads {FORMAT_VERSION})")
    try:
        stored = json.loads(meta["config"])
        file_config = AcousticConfig.from_dict(stored)
    except (KeyError, ValueError, RecursionError, ParameterError, TypeError) as e:  # (ValueError: JSON's too)
        raise VoiceFileError(f"{path}: metadata 'config' is missing or invalid ({e})") from None
    if config is None:
        config = file_config
    elif config != file_config:
        field = _first_difference(config.to_dict(), file_config.to_dict())
        raise VoiceFileError(f"{path}: acoustic config field '{field}' differs between voice.json and the "
                             f"weights file; re-export the voice")
    held = sum(int(t.size) for t in tensors.values())
    if config.approx_parameters() > 4 * held + (1 << 20):  # the file bounds the memory a model may take
        raise VoiceFileError(f"{path}: the config describes a model of about {config.approx_parameters():,} "
                             f"numbers, the file holds {held:,}: not built")
    expected = tensor_specs(config)
    missing = sorted(set(expected) - set(tensors))
    extra = sorted(set(tensors) - set(expected))
    if missing:
        raise VoiceFileError(f"{path}: missing tensor(s) {missing[:5]}{' ...' if len(missing) > 5 else ''}")
    if extra:
        raise VoiceFileError(f"{path}: unexpected tensor(s) {extra[:5]}{' ...' if len(extra) > 5 else ''}")
    state = {}
    for name, (shape, floating) in expected.items():
        t = tensors[name]
        if tuple(t.shape) != shape:
            raise VoiceFileError(f"{path}: tensor '{name}' has shape {tuple(t.shape)}, expected {shape}")
        if floating:
            if t.dtype not in _FLOAT_DTYPES:
                raise VoiceFileError(f"{path}: tensor '{name}' must be float16 or float32, found {t.dtype}")
            t = t.astype(np.float32)
            if not np.isfinite(t).all():
                raise VoiceFileError(f"{path}: tensor '{name}' contains NaN or infinite values")
        elif not np.issubdtype(t.dtype, np.integer):
            raise VoiceFileError(f"{path}: tensor '{name}' must be an integer tensor, found {t.dtype}")
        else:
            t = t.astype(np.int64)
        state[name] = t
    _check_pruning(path, state)
    if not (state["mel_std"] > 0).all():
        raise VoiceFileError(f"{path}: tensor 'mel_std' must be positive (the corpus's per-bin spread), "
                             f"found {float(state['mel_std'].min()):g}")
    return config, state


def _check_pruning(path: Path, state: dict[str, np.ndarray]) -> None:
    """The pruning buffers must name real peers and leave at least one live edge."""
    for prefix, n_peers in (("token_fusion", 3), ("frame_fusion", 4)):
        choice = state[f"{prefix}.peer_choice"]
        alive = state[f"{prefix}.edge_alive"]
        if ((choice < -1) | (choice >= n_peers)).any():
            raise VoiceFileError(f"{path}: '{prefix}.peer_choice' holds {choice.tolist()}, "
                                 f"each must be -1 (soft) or a peer index below {n_peers}")
        if not ((alive == 0) | (alive == 1)).all() or not alive.any():
            raise VoiceFileError(f"{path}: '{prefix}.edge_alive' must be 0/1 with at least one 1, "
                                 f"found {alive.tolist()}")
