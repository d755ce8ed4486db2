"""Does replaced-token-detection pre-training help the acoustic model? Writes docs/bench/pretrain.md.

Three runs on the corpus (1 CPU thread each, same small model shape):

1. ``pretrain``: :func:`wavern.training.pretrain.pretrain_encoder` for ``--pretrain-steps``;
2. ``scratch``: :func:`train_acoustic` for ``--acoustic-steps`` from a random encoder;
3. ``init``: the same run (same seed, so the same batches and the same initial weights
   everywhere but the encoder) starting from the pre-trained encoder (``init_encoder``).

Both acoustic runs evaluate on the held-out utterances every ``--eval-every`` steps; the
report tabulates both curves. A stage whose run dir already holds a finished run is skipped
(delete ``runs/bench_pretrain`` to redo everything).

    .venv/bin/python bench/pretrain.py                       # everything (~25 min on 1 thread)
    .venv/bin/python bench/pretrain.py --report-only         # rebuild the markdown from the runs
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUNS = ROOT / "runs" / "bench_pretrain"
OUT = ROOT / "docs" / "bench" / "pretrain.md"


def shapes(n_symbols: int, speakers: tuple[str, ...], args):
    from wavern.conditioning.config import AcousticConfig, EncoderConfig

    enc = EncoderConfig(n_symbols=n_symbols, d_model=args.d_model, n_layers=args.layers, ffn_channels=args.ffn)
    model = AcousticConfig(encoder=enc, speakers=speakers, decoder_d_model=args.d_model,
                           duration_channels=args.d_model, decoder_layers=args.layers,
                           decoder_ffn_channels=args.ffn)
    return enc, model


def run(args) -> None:
    from wavern.training.acoustic_trainer import AcousticTrainConfig, train_acoustic
    from wavern.training.corpus import load_corpus
    from wavern.training.pretrain import PretrainConfig, pretrain_encoder

    corpus = load_corpus(args.corpus)
    voices = tuple(sorted({r.voice for r in corpus.train if r.voice is not None}))
    enc, model = shapes(len(corpus.symbols), voices, args)
    t = time.monotonic()
    pre = PretrainConfig(corpus_dir=args.corpus, run_dir=str(RUNS / "pretrain"), encoder=enc,
                         steps=args.pretrain_steps, batch_size=32, lr=1e-3, warmup_steps=100,
                         eval_every=100, threads=1, device="cpu", progress=False)
    res = pretrain_encoder(pre)
    timings = {"pretrain_s": time.monotonic() - t}
    for name, init in (("scratch", None), ("init", str(res.encoder_path))):
        t = time.monotonic()
        cfg = AcousticTrainConfig(corpus_dir=args.corpus, out_dir=str(RUNS / name), model=model,
                                  steps=args.acoustic_steps, batch_size=16, lr=1e-3, warmup_steps=50,
                                  eval_every=args.eval_every, eval_utterances=16, threads=1, device="cpu",
                                  progress=False, init_encoder=init)
        train_acoustic(cfg)
        timings[f"{name}_s"] = time.monotonic() - t
    (RUNS / "timings.json").write_text(json.dumps(timings, indent=1))


def _rows(path: Path, kind: str) -> list[dict]:
    return [r for r in (json.loads(x) for x in path.read_text().splitlines() if x.strip()) if r["kind"] == kind]


def report(args) -> Path:
    pre_eval = _rows(RUNS / "pretrain" / "metrics.jsonl", "eval")
    scratch = {r["step"]: r for r in _rows(RUNS / "scratch" / "metrics.jsonl", "eval")}
    init = {r["step"]: r for r in _rows(RUNS / "init" / "metrics.jsonl", "eval")}
    pre_cfg = json.loads((RUNS / "pretrain" / "train_config.json").read_text())
    ac_cfg = json.loads((RUNS / "scratch" / "train_config.json").read_text())
    timings = json.loads((RUNS / "timings.json").read_text()) if (RUNS / "timings.json").is_file() else {}
    enc = pre_cfg["encoder"]
    lines = [
        "## Replaced-token-detection pre-training of the text encoder",
        "",
        "Reproduce: `.venv/bin/python bench/pretrain.py` (writes this file; runs in `runs/bench_pretrain/`).",
        "",
        f"Model: encoder d_model {enc['d_model']}, {enc['n_layers']} layers, FFN {enc['ffn_channels']}, "
        f"window {enc['window']}; acoustic decoder of the same width and depth "
        f"(`AcousticConfig(decoder_d_model={ac_cfg['model']['decoder_d_model']}, "
        f"decoder_layers={ac_cfg['model']['decoder_layers']})`). 1 CPU thread each, on the shared 2-core machine.",
        "",
        f"Pre-training: {pre_cfg['steps']} steps, batch {pre_cfg['batch_size']} "
        f"({pre_cfg['bimodal_fraction']:.0%} bimodal corpus utterances, the rest phonemised "
        f"`sotu.txt` sentences in {', '.join(pre_cfg['text_voices'])}), mask rate {pre_cfg['mask_rate']}, "
        f"Adam lr {pre_cfg['lr']}"
        + (f"; {timings['pretrain_s'] / 60:.1f} min." if "pretrain_s" in timings else "."),
        "",
        "Held-out pre-training metrics (60 held-out corpus utterances capped at "
        f"{pre_cfg['eval_sequences']}, plus as many held-out sentences; fixed masks):",
        "",
        "| step | text RTD BCE | text bal. acc | audio RTD BCE | audio bal. acc | MLM CE | MLM acc | replaced share |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in pre_eval:
        lines.append(f"| {r['step']} | {r['text_rtd']:.3f} | {r.get('text_balanced_acc', float('nan')):.3f} | "
                     f"{r['audio_rtd']:.3f} | {r.get('audio_balanced_acc', float('nan')):.3f} | {r['mlm']:.2f} | "
                     f"{r['mlm_acc']:.3f} | {r['text_replaced_share']:.2f} |")
    lines += [
        "",
        f"Acoustic model, {ac_cfg['steps']} steps, batch {ac_cfg['batch_size']}, Adam lr {ac_cfg['lr']} "
        f"(warm-up {ac_cfg['warmup_steps']}), seed {ac_cfg['seed']}: identical batches and identical "
        "initial weights outside the encoder; only the encoder's start differs. Held-out "
        f"(`evaluate_acoustic`, first {ac_cfg['eval_utterances']} held-out utterances):",
        "",
        "| step | mel L1 scratch | mel L1 pre-trained | duration MAE (frames) scratch | pre-trained "
        "| MCD-DTW (dB) scratch | pre-trained |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for step in sorted(set(scratch) & set(init)):
        s, p = scratch[step], init[step]
        lines.append(f"| {step} | {s['mel_l1']:.3f} | {p['mel_l1']:.3f} | {s['duration_mae']:.2f} | "
                     f"{p['duration_mae']:.2f} | {s['mcd_dtw']:.2f} | {p['mcd_dtw']:.2f} |")
    if timings:
        lines += ["", "Wall time: " + ", ".join(f"{k[:-2]} {v / 60:.1f} min" for k, v in timings.items()) + "."]
    if args.conclusion:
        lines += ["", args.conclusion]
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text("\n".join(lines) + "\n")
    return OUT


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--corpus", default=str(ROOT / "data" / "corpus"))
    p.add_argument("--pretrain-steps", type=int, default=500)
    p.add_argument("--acoustic-steps", type=int, default=200)
    p.add_argument("--eval-every", type=int, default=50)
    p.add_argument("--d-model", type=int, default=128)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--ffn", type=int, default=256)
    p.add_argument("--report-only", action="store_true")
    p.add_argument("--conclusion", default="", help="a closing paragraph for the report")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    if not args.report_only:
        run(args)
    print(report(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
