"""Voices: assemble a voice folder from trained models, and `wavern train voice` end to end.

A voice folder is ``voice.json`` + ``acoustic.safetensors`` + ``vocoder.safetensors`` +
``MODEL_CARD.md`` (docs/ARCHITECTURE.md, "Voice format"). :func:`assemble_voice` writes one
from an :class:`~wavern.conditioning.acoustic.AcousticModel` and a
:class:`~wavern.vocoder.model.WaveRNN`; :func:`build_voice` runs the whole recipe (corpus →
acoustic model → vocoder → export) resumably, each stage continuing from its run folder.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from wavern.dsp import DEFAULT_MEL
from wavern.engine.voicefile import FORMAT, FORMAT_VERSION, read_voice_json, write_voice_json
from wavern.errors import ParameterError, WavernError
from wavern.training.vocoder_checkpoint import load_vocoder_checkpoint

__all__ = ["assemble_voice", "VoiceBuildConfig", "build_voice", "PRESETS"]

log = logging.getLogger(__name__)


def assemble_voice(out_dir: str | Path, *, acoustic, vocoder, symbols: list[str], name: str,
                   espeak_voice: str = "en-us", provenance: dict[str, Any] | None = None,
                   inference: dict[str, Any] | None = None, card: str = "", description: str = "",
                   vocoder_dtype=np.float16) -> Path:
    """Write a complete voice folder; returns its path. Reads it back through the validator.

    Args:
        out_dir: the voice folder (created; files replaced atomically one by one).
        acoustic: a trained AcousticModel.
        vocoder: a trained WaveRNN (pruning masks applied).
        symbols: the phoneme symbol table (index = id) the acoustic model was trained with.
        name: voice name (``wavern say --voice NAME``).
        espeak_voice: the espeak-ng voice the front end phonemises with.
        provenance: corpus, seeds, steps, wall time, metrics.
        inference: defaults for a request: ``temperature``, ``speaker``, ``pause_s``.
        card: MODEL_CARD.md text.
        description: voice.json's ``description`` for a user (who speaks, what the voice is good at,
            its licence; what `wavern voices` and the window show); none written when empty.
    """
    from wavern.conditioning.export import save_acoustic
    from wavern.vocoder.export import export_vocoder

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if len(symbols) > acoustic.config.encoder.n_symbols:
        raise ParameterError(f"{len(symbols)} symbols but the acoustic model embeds {acoustic.config.encoder.n_symbols}")
    save_acoustic(acoustic, out / "acoustic.safetensors", dtype=__import__("torch").float16)
    export_vocoder(vocoder, out / "vocoder.safetensors", dtype=vocoder_dtype)
    vcfg = vocoder.config.to_dict()
    meta = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "name": name,
        **({"description": description} if description else {}),
        "espeak_voice": espeak_voice,
        "dsp": DEFAULT_MEL.to_dict(),
        "symbols": list(symbols),
        "acoustic": acoustic.config.to_dict(),
        "vocoder": vcfg,
        "inference": {"temperature": 1.0, "speaker": acoustic.config.speakers[0], "pause_s": 0.0,
                      **(inference or {})},
        "provenance": provenance or {},
    }
    write_voice_json(out, meta)
    (out / "MODEL_CARD.md").write_text(card or f"# {name}\n\nA wavern voice.\n", encoding="utf-8")
    read_voice_json(out)
    return out


class TrainingStopped(WavernError):
    """A stage of a voice build stopped before its last step (a signal, a time limit): nothing is
    assembled; the stage's checkpoint lets the same command continue."""


def _check_writable(out: Path) -> None:
    """Refuse a voice folder that cannot be written (a read-only install, a file in the way)
    before anything is trained: a temporary file made and removed in ``out`` or, where it does not
    exist yet, in the nearest folder above it that does."""
    probe = out
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        raise ParameterError(f"cannot write the voice to {out}: {probe} is not a folder; give --set out_dir=FOLDER")
    try:
        with tempfile.NamedTemporaryFile(dir=probe, prefix=".wavern-write-check-"):
            pass
    except OSError as e:
        raise ParameterError(f"cannot write the voice to {out} ({e.strerror or e}); "
                             f"give --set out_dir=FOLDER") from e


@dataclasses.dataclass(frozen=True)
class VoiceBuildConfig:
    """`wavern train voice`: the whole recipe. Each stage resumes from its run folder."""

    preset: str = "default"  # "default" or "tiny" (a few minutes; barely intelligible; the bootstrap voice)
    name: str | None = None  # voice name (default: the preset's)
    corpus_dir: str | None = None  # default: data/corpus (default) or data/corpus-tiny
    run_dir: str | None = None  # default: runs/ (default) or runs/tiny
    out_dir: str | None = None  # default: assets/voices/<name>
    utterances: int | None = None  # corpus size
    acoustic_steps: int | None = None
    vocoder_steps: int | None = None
    threads: int = 2
    seed: int = 0
    device: str = "cpu"
    resume: bool = True
    description: str = ""  # voice.json's description for a user (default: what the build makes)


# The vocoder of both presets: an LPC WaveRNN (order 16, linear-coded excitation, no prediction
# input) with a long-term (pitch) predictor from the pitch features and the residuals around one
# period back as GRU inputs; output layers pruned row by row (docs/TRAINING.md, "The settings that matter").
_PERIOD_VOCODER = dict(lpc_order=16, lpc_prediction_input=False, head_pruning="rows", pitch=True, excitation="linear",
                       ltp=True, ltp_input=True, ltp_input_taps=5)
#: The shipped voice's post-filter: formant and pitch stages (docs/TRAINING.md, docs/BENCHMARKS.md)
SHIPPED_POSTFILTER = {"gamma_num": 0.92, "gamma_den": 0.96, "tilt": 0.2, "order": 56, "pitch_gain": 0.5}
#: The shipped voice's mel matching after it (engine/melmatch.py, docs/bench/melmatch.md): of the
#: acoustic model's mel with the band gains' logs smoothed over 1.5 bands, of a measured mel band by band
SHIPPED_MELMATCH = {"cap": 4.0, "floor": 0.001, "iterations": 8, "smooth": 1.5}
SHIPPED_MELMATCH_MEASURED = {"cap": 4.0, "floor": 0.001, "iterations": 8}
#: The shipped voice's long-term predictor gain factor in mel-matched requests (``inference.ltp_gain_scale``,
#: ``Voice.ltp_scale_for``; docs/TRAINING.md)
SHIPPED_LTP_GAIN_SCALE = 1.6

PRESETS: dict[str, dict[str, Any]] = {
    # The bootstrap voice: small enough to build in minutes on 2 cores, with the default's
    # architecture. It proves the pipeline, not quality: expect buzzy, mostly unintelligible speech.
    "tiny": dict(name="tiny", corpus="data/corpus-tiny", runs="runs/tiny", utterances=200, voices=["en-us"],
                 acoustic=dict(steps=300, batch_size=8, warmup_steps=30,  # (400, the default, outlasted the run)
                               model=dict(encoder=dict(d_model=64, n_layers=2, n_heads=2, window=8,
                                                       ffn_channels=128),
                                          decoder_layers=2, decoder_d_model=64, decoder_ffn_channels=128,
                                          duration_channels=64, speaker_dim=16, ref_channels=32, peer_width=16,
                                          pitch=True, prosody=True)),
                 vocoder=dict(steps=300, batch_size=16, period_input_fade=0.8,
                              vocoder=dict(hidden_size=64, cond_channels=32, cond_blocks=1, prune_start_step=100,
                                           prune_ramp_steps=150, prune_every_steps=50, target_density=0.5,
                                           **_PERIOD_VOCODER)),
                 postfilter=True, melmatch=True, ltp_gain_scale=SHIPPED_LTP_GAIN_SCALE),
    # The shipped espeak voice's configuration (assets/voices/espeak), from nothing in one run per model. Its models
    # got there in stages over sessions (docs/TRAINING.md: the acoustic model gained its
    # pitch and prosody inputs by fine-tuning, the vocoder its LPC, long-term predictor and period
    # inputs, and its learning rate fell from 1e-3 to 1e-4; each segment's period input faded at
    # random, --period-input-fade 0.8, from step 60905 on, here from the start; it was pruned to
    # 10 % block density by step 10000 and carried on to 5 % from step 67851, here 5 % by 10000; it
    # had 384 hidden units until session 20 took it to 320 by structured pruning, training.shrink);
    # assets/training/resume.sh continues those runs. Corpus: 2000 sentences, seed 0, the builder's varied set of 72 espeak-ng voices.
    "default": dict(name="espeak", corpus="data/corpus", runs="runs", utterances=2000, voices=None,
                    acoustic=dict(steps=100000, batch_size=8, lr=1.5e-3, warmup_steps=200, lr_half_life_steps=10000,
                                  model=dict(encoder=dict(d_model=128, n_layers=3, ffn_channels=256),
                                             decoder_kind="window", decoder_layers=3, decoder_d_model=128,
                                             decoder_ffn_channels=256, duration_channels=128,
                                             pitch=True, prosody=True)),
                    vocoder=dict(steps=200000, batch_size=16, segment_frames=4, lr=1e-3, warmup_steps=100,
                                 lr_half_life_steps=40000, lr_min=3e-5, bf16="on", period_input_fade=0.8,
                                 vocoder=dict(hidden_size=320, cond_channels=128, cond_blocks=3,
                                              target_density=0.05, prune_start_step=2000, prune_ramp_steps=8000,
                                              prune_every_steps=200, **_PERIOD_VOCODER)),
                    postfilter=SHIPPED_POSTFILTER, melmatch=SHIPPED_MELMATCH,
                    melmatch_measured=SHIPPED_MELMATCH_MEASURED, ltp_gain_scale=SHIPPED_LTP_GAIN_SCALE),
}


def build_voice(cfg: VoiceBuildConfig) -> dict[str, Any]:
    """Corpus → acoustic model → vocoder → voice folder (:func:`assemble_from_runs`); returns a summary."""
    import torch

    from wavern.training.acoustic_trainer import AcousticTrainConfig, train_acoustic
    from wavern.training.corpus import build_corpus
    from wavern.training.vocoder_trainer import VocoderTrainConfig, train_vocoder
    from wavern.vocoder.config import VocoderConfig

    if cfg.preset not in PRESETS:
        raise ParameterError(f"unknown preset '{cfg.preset}'; choose one of {', '.join(PRESETS)}")
    p = PRESETS[cfg.preset]
    name = cfg.name or p["name"]
    corpus = Path(cfg.corpus_dir or p["corpus"])
    runs = Path(cfg.run_dir or p["runs"])
    import wavern.assets

    out = Path(cfg.out_dir).expanduser() if cfg.out_dir else Path(wavern.assets.__file__).parent / "voices" / name
    _check_writable(out)  # now, not after hours of training
    v = dict(p["vocoder"])
    if cfg.vocoder_steps:
        v["steps"] = cfg.vocoder_steps
    if "vocoder" in v:
        v["vocoder"] = VocoderConfig.from_dict({**VocoderConfig().to_dict(), **v["vocoder"]})
    if cfg.resume:  # a vocoder run of another configuration there is refused now, not after the acoustic stage
        _check_vocoder_run(runs / "vocoder", v.get("vocoder", VocoderConfig()))
    t0 = time.time()
    torch.set_num_threads(cfg.threads)
    if not (corpus / "metadata.jsonl").is_file():
        log.info("building corpus %s", corpus)
        build_corpus(corpus, utterances=cfg.utterances or p["utterances"], seed=cfg.seed, voices=p["voices"],
                     jobs=cfg.threads)  # (--threads: the corpus stage's espeak processes too; the bytes do not change)
    try:  # what the corpus is (an existing one may not be what this call would build); the card says it
        have = json.loads((corpus / "corpus.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        have = {}
    if cfg.utterances is not None and have.get("utterances") not in (None, cfg.utterances):
        raise ParameterError(f"{corpus} holds a corpus of {have['utterances']} utterances; this build asks for "
                             f"{cfg.utterances}: give another corpus_dir, remove that one, or leave utterances unset")
    a = dict(p["acoustic"])
    if cfg.acoustic_steps:
        a["steps"] = cfg.acoustic_steps
    if "model" in a:  # the symbol table and speaker list come from the corpus
        from wavern.conditioning.config import AcousticConfig
        from wavern.training.corpus import load_corpus

        c = load_corpus(corpus)
        m = dict(a["model"])
        m["encoder"] = {**m.get("encoder", {}), "n_symbols": len(c.symbols)}
        m["speakers"] = tuple(sorted({r.voice for r in c.train if r.voice is not None}))
        a["model"] = AcousticConfig.from_dict(m)
    acfg = AcousticTrainConfig(corpus_dir=str(corpus), out_dir=str(runs / "acoustic"), seed=cfg.seed,
                               device=cfg.device, threads=cfg.threads, resume=cfg.resume, **a)
    res = train_acoustic(acfg)
    if not res.finished:  # stopped (a signal, the time limit): no half-trained voice; a rerun resumes
        raise TrainingStopped(f"the acoustic model stopped at step {res.step} of {acfg.steps} (checkpoint in "
                              f"{runs / 'acoustic'}); run the same command again to continue")
    vcfg = VocoderTrainConfig(corpus_dir=str(corpus), run_dir=str(runs / "vocoder"), seed=cfg.seed,
                              device=cfg.device, threads=cfg.threads, resume=cfg.resume, fresh=not cfg.resume, **v)
    trainer = train_vocoder(vcfg)
    if trainer.step < vcfg.steps:
        raise TrainingStopped(f"the vocoder stopped at step {trainer.step} of {vcfg.steps} (checkpoint in "
                              f"{runs / 'vocoder'}); run the same command again to continue")
    held_out = {stage: _last_eval(runs / stage / "metrics.jsonl") for stage in ("acoustic", "vocoder")}
    card = (f"# {name}\n\nwavern's {cfg.preset} voice, trained on this machine by `wavern train voice "
            f"--set preset='\"{cfg.preset}\"'` from an espeak-ng corpus of "
            f"{have.get('utterances', cfg.utterances or p['utterances'])} sentences (corpus seed "
            f"{have.get('seed', cfg.seed)}).\n")
    description = cfg.description or (f"An English voice learnt from espeak-ng's voices ({cfg.preset} preset of "
                                       f"`wavern train voice`): espeak-like speech and intonation. Licence: "
                                       f"GPL-3.0-or-later, as wavern.")
    assemble_from_runs(out, acoustic_checkpoint=runs / "acoustic" / "checkpoint.pt",
                       vocoder_checkpoint=runs / "vocoder" / "checkpoint.pt", corpus_dir=corpus, name=name,
                       card=card, description=description, postfilter=p["postfilter"], melmatch=p.get("melmatch", False),
                       melmatch_measured=p.get("melmatch_measured"), ltp_gain_scale=p.get("ltp_gain_scale"),
                       metrics={"acoustic_held_out": held_out["acoustic"], "vocoder_held_out": held_out["vocoder"],
                                "last_call_wall_s": round(time.time() - t0, 1)})
    prov = json.loads((out / "voice.json").read_text()).get("provenance", {})
    # the runs' own training time over every call (a resumed build's last call is only part of it)
    wall = prov["acoustic"]["wall_s"] + prov["vocoder"]["wall_s"]
    return {"voice": str(out), "preset": cfg.preset, "build_wall_s": round(wall, 1), **prov}


def _check_vocoder_run(run_dir: Path, want) -> None:
    """Refuse a vocoder run folder whose checkpoint holds another vocoder configuration than ``want``
    (a VocoderConfig): the build would resume it and fail there, after the acoustic stage."""
    from wavern.training.common import load_torch
    from wavern.training.vocoder_checkpoint import CHECKPOINT
    from wavern.vocoder.config import VocoderConfig

    path = run_dir / CHECKPOINT
    if not path.is_file():
        return
    ck = load_torch(path, "vocoder checkpoint", map_location="cpu", weights_only=False)
    saved = VocoderConfig.from_dict(ck["vocoder_config"]) if isinstance(ck, dict) and "vocoder_config" in ck else None
    if saved != want:
        have, wanted = (saved.to_dict() if saved else {}), want.to_dict()
        differ = sorted(k for k in wanted if have.get(k) != wanted[k])
        raise ParameterError(f"{run_dir} holds a vocoder run of another configuration ({', '.join(differ[:6])} "
                             f"differ); give another run folder (--run-dir) or move that one away")


def _last_eval(path: Path) -> dict[str, Any]:
    """The last held-out evaluation a trainer wrote to its metrics.jsonl (its step and numbers), or {}."""
    from wavern.training.common import MetricsLog

    rows = [r for r in MetricsLog(path, tensorboard=False).read() if isinstance(r, dict) and r.get("kind") == "eval"]
    return {k: v for k, v in rows[-1].items() if k != "kind" and isinstance(v, (int, float))} if rows else {}


#: The shipped voice's default speaker, where the model has it: chosen in session 7 for the best phone accuracy
#: of the 72 speakers end to end; re-measured in session 10 with the pitch stage and mel matching, the lowest
#: MCD against espeak-ng and phone accuracy 0.911 against the best 0.925 (docs/bench/speakers.md,
#: `bench/speakers.py`; en-us+m1 before session 7)
DEFAULT_SPEAKER = "en+m6"


def assemble_from_runs(out_dir: str | Path, *, acoustic_checkpoint: str | Path, vocoder_checkpoint: str | Path,
                       corpus_dir: str | Path, name: str = "default", metrics: dict[str, Any] | None = None,
                       card: str = "", postfilter: bool | dict = True, melmatch: bool | dict = False,
                       melmatch_measured: bool | dict | None = None, speaker: str | None = None,
                       ltp_gain_scale: float | None = None, description: str = "") -> Path:
    """Write a voice folder from the current checkpoints of an acoustic and a vocoder run.

    This is how the shipped voice is refreshed while the long runs continue: whatever step
    each run has reached is exported, with the steps and wall time in the provenance.
    ``postfilter``: the engine's formant post-filter (``wavern.engine.postfilter``) with its
    default settings (True), these settings (a dict), or none (False); ``melmatch`` likewise for
    mel matching after it (``wavern.engine.melmatch``) of the acoustic model's mel, and
    ``melmatch_measured`` of a mel measured from audio (None: as ``melmatch``). ``speaker``: the voice's
    default speaker (None: :data:`DEFAULT_SPEAKER` where the model has it, else its first).
    ``ltp_gain_scale``: ``inference.ltp_gain_scale`` (the long-term gains' factor in mel-matched
    requests; None: none written, so 1). ``description``: voice.json's, for a user (none when empty).
    """
    from wavern.engine.postfilter import PostfilterConfig

    from wavern.training.acoustic_trainer import load_checkpoint

    acoustic, ack = load_checkpoint(acoustic_checkpoint)
    vocoder, vck = load_vocoder_checkpoint(vocoder_checkpoint)
    corpus_meta = json.loads((Path(corpus_dir) / "corpus.json").read_text())
    symbols = corpus_meta["symbols"]
    pf = {}
    if postfilter:
        pf_cfg = PostfilterConfig() if postfilter is True else PostfilterConfig.from_dict(postfilter)
        pf = {"postfilter": pf_cfg.to_dict()}
    if melmatch:
        from wavern.engine.melmatch import MelMatchConfig

        mm_cfg = MelMatchConfig() if melmatch is True else MelMatchConfig.from_dict(melmatch)
        pf["melmatch"] = mm_cfg.to_dict()
    if melmatch_measured is not None:
        from wavern.engine.melmatch import MelMatchConfig

        if melmatch_measured is False:
            pf["melmatch_measured"] = None
        else:
            mm_cfg = MelMatchConfig() if melmatch_measured is True else MelMatchConfig.from_dict(melmatch_measured)
            pf["melmatch_measured"] = mm_cfg.to_dict()
    if ltp_gain_scale is not None:
        pf["ltp_gain_scale"] = float(ltp_gain_scale)
    speakers = acoustic.config.speakers
    if speaker is None:
        speaker = DEFAULT_SPEAKER if DEFAULT_SPEAKER in speakers else speakers[0]
    elif speaker not in speakers:
        raise ParameterError(f"speaker {speaker!r} is not one of the model's: {', '.join(speakers)}")
    prov = {
        "corpus": {k: corpus_meta.get(k) for k in ("seed", "utterances", "espeak_version") if k in corpus_meta},
        "acoustic": {"step": int(ack.get("step", 0)),  # (the acoustic trainer's checkpoint says elapsed_s)
                     "wall_s": float(ack.get("elapsed_s", ack.get("wall_s", 0.0)) or 0.0)},
        "vocoder": {"step": int(vck.get("step", 0)), "wall_s": float(vck.get("wall_s", 0.0) or 0.0),
                    "density": vck.get("pruner", {}).get("sparsity") is not None
                    and 1.0 - float(vck["pruner"]["sparsity"])},
        "assembled": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "metrics": metrics or {},
    }
    return assemble_voice(out_dir, acoustic=acoustic, vocoder=vocoder, symbols=symbols, name=name,
                          espeak_voice=speaker.split("+")[0], provenance=prov,
                          inference={"speaker": speaker, **pf}, card=card, description=description)
