"""Compare vocoder checkpoints inside the shipped voice: copy synthesis and end to end, several seeds.

An acoustic model's checkpoint, named ``acoustic:PATH``, replaces the voice's acoustic model instead
(its copy synthesis is the voice's; ``--n-copy 0`` skips it).

Each checkpoint (a vocoder trainer's full or compact checkpoint) replaces the vocoder of ``--voice``
(acoustic model, post-filter, speaker and the rest kept), in a temporary folder; "shipped" stands
for the voice as it is. Every voice then renders the same held-out sentences:

- copy synthesis of ``--n-copy`` sentences from their true features (STOI, PESQ-WB, MCD-DTW, phone
  accuracy, voicing and gross pitch errors; ``training.evaluate.evaluate_copy_synthesis``);
- end to end of ``--n-e2e`` sentences (phone accuracy, MCD-DTW against espeak-ng, YIN's voiced share;
  ``eval_voice.end_to_end``);

once per sampling seed, and reports the means over the seeds. The tables of
docs/TRAINING.md's vocoder rows (sessions 7 and 8) were measured this way (before the voice had mel
matching; ``--no-melmatch`` measures without it since, ``--raw`` without the post-filter too):

    .venv/bin/python bench/compare_vocoders.py shipped runs/phase3/checkpoint.pt runs/fade_hi/checkpoint.pt
    .venv/bin/python bench/compare_vocoders.py shipped runs/phase3/checkpoint.pt --draw 3 --n-copy 16
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

KEYS = ("stoi", "pesq_wb", "mcd_db", "phone_acc", "vde", "gpe", "e2e_phone", "e2e_mcd", "e2e_voiced")


def swap_vocoder(voice_dir: Path, checkpoint: str, out: Path) -> Path:
    """``voice_dir`` with its vocoder replaced by ``checkpoint``'s, written to ``out``; a checkpoint
    named ``acoustic:PATH`` (an acoustic trainer's checkpoint.pt) replaces the acoustic model instead."""
    from wavern.conditioning.config import AcousticConfig
    from wavern.conditioning.export import load_acoustic
    from wavern.training.voice import assemble_voice, load_vocoder_checkpoint
    from wavern.vocoder.config import VocoderConfig
    from wavern.vocoder.export import load_vocoder

    meta = json.loads((voice_dir / "voice.json").read_text())
    prov = dict(meta.get("provenance", {}))
    if checkpoint.startswith("acoustic:"):
        from wavern.training.acoustic_trainer import load_checkpoint

        path = checkpoint.split(":", 1)[1]
        acoustic, ck = load_checkpoint(path)
        vocoder = load_vocoder(voice_dir / "vocoder.safetensors", VocoderConfig.from_dict(meta["vocoder"]))
        prov["acoustic"] = {"step": int(ck.get("step", 0)), "checkpoint": path}
    else:
        acoustic = load_acoustic(voice_dir / "acoustic.safetensors", AcousticConfig.from_dict(meta["acoustic"]))
        vocoder, ck = load_vocoder_checkpoint(checkpoint)
        prov["vocoder"] = {"step": int(ck.get("step", 0)), "checkpoint": str(checkpoint)}
    return assemble_voice(out, acoustic=acoustic, vocoder=vocoder, symbols=meta["symbols"], name=meta["name"],
                          espeak_voice=meta["espeak_voice"], provenance=prov, inference=meta["inference"],
                          card=(voice_dir / "MODEL_CARD.md").read_text())


def measure(voice, corpus: Path, *, draw: int, n_copy: int, n_e2e: int, seeds: list[int]) -> dict:
    """The means over ``seeds`` of the copy-synthesis and end-to-end metrics (:data:`KEYS`)."""
    from eval_voice import end_to_end, held_out_records

    from wavern.dsp import int16_to_float
    from wavern.training.evaluate import evaluate_copy_synthesis

    records = held_out_records(corpus, n_e2e, draw)
    rows = []
    for seed in seeds:
        c = {} if n_copy == 0 else evaluate_copy_synthesis(
            lambda f: int16_to_float(voice.render_mel(f, seed=seed, measured=True)), corpus, n_copy, draw,
            pitch=voice.acoustic.config.pitch)
        e = end_to_end(voice, records, seed=seed)
        copy = [c.get(k, float("nan")) for k in ("stoi", "pesq_wb", "mcd_db", "phone_acc", "vde", "gpe")]
        rows.append(copy + [e["phone_acc_end_to_end"], e["mcd_dtw_vs_espeak"], e["voiced_end_to_end"]])
    return dict(zip(KEYS, np.mean(np.asarray(rows, np.float64), axis=0).tolist()))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkpoints", nargs="+", help="vocoder checkpoints, 'acoustic:PATH' for an acoustic model's "
                                                   "checkpoint, or 'shipped' for --voice as it is")
    ap.add_argument("--voice", type=Path, default=ROOT / "assets" / "voices" / "espeak")
    ap.add_argument("--corpus", type=Path, default=ROOT / "data" / "corpus")
    ap.add_argument("--draw", type=int, default=0, help="selection seed of the held-out sentences")
    ap.add_argument("--n-copy", type=int, default=10, help="copy-synthesis sentences (0: none)")
    ap.add_argument("--n-e2e", type=int, default=20)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1], help="sampling seeds (means over them)")
    ap.add_argument("--no-melmatch", action="store_true",
                    help="measure without the voice's mel matching (the WaveRNN and post-filter, as before session 9)")
    ap.add_argument("--raw", action="store_true",
                    help="measure the WaveRNN alone: without the post-filter and without mel matching")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    from wavern.engine import Voice

    if not (args.corpus / "metadata.jsonl").is_file():
        print(f"[compare_vocoders] no corpus at {args.corpus}: build it first (`wavern corpus build`)")
        return 1
    print("| vocoder | step | " + " | ".join(KEYS) + " |")
    print("|---|---:|" + "---:|" * len(KEYS))
    with tempfile.TemporaryDirectory() as tmp:
        for i, name in enumerate(args.checkpoints):
            t0 = time.time()
            path = args.voice if name == "shipped" else swap_vocoder(args.voice, name, Path(tmp) / f"v{i}")
            voice = Voice.load(path)
            if args.no_melmatch or args.raw:
                voice.melmatch = voice.melmatch_measured = None
            if args.raw:
                voice.postfilter = None
            m = measure(voice, args.corpus, draw=args.draw, n_copy=args.n_copy, n_e2e=args.n_e2e, seeds=args.seeds)
            swapped = "acoustic" if name.startswith("acoustic:") else "vocoder"  # the step of the model swapped in
            step = voice.meta.get("provenance", {}).get(swapped, {}).get("step")
            print(f"| {name} | {step} | " + " | ".join(f"{m[k]:.3f}" for k in KEYS) + " |", flush=True)
            print(json.dumps({"vocoder": name, "step": step, "draw": args.draw, "seeds": args.seeds,
                              "wall_s": round(time.time() - t0, 1), **{k: round(m[k], 4) for k in KEYS}}),
                  file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
