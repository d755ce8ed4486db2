"""Shrink a trained vocoder's hidden state by whole unit groups, for a fine-tune to start from.

    python -m wavern.training.shrink SOURCE OUT --to-hidden 320 [--voice DIR] -- TRAINER OPTIONS

SOURCE is a vocoder checkpoint (full or compact) or a voice folder; TRAINER OPTIONS are those it
was trained with (``$VOC`` of assets/training/voc_options.sh), which give the data and the held-out
batches. The driver measures, on those batches (teacher forced):

1. the mean hidden state and the heads' ReLU outputs (what :func:`~wavern.vocoder.pruning.shrink_hidden`
   folds into biases);
2. for every group of hidden units (16 for 16x4 blocks), how much the held-out loss rises when the
   group's outputs are replaced by their means;

then removes, from each half, the groups that cost least, and writes OUT: the voice folder ``--voice``
(default: the shipped voice) with this smaller vocoder, and ``shrink.json`` with every group's cost
and the held-out loss before and after. A fine-tune starts from it with ``--init-from OUT`` and
``--hidden`` set to the new size (the pruner keeps its density on the smaller matrices).

The point is speed: the engine's time per sample goes with H (the gate update linearly, W_hh's blocks
as H squared at one density); docs/bench/engine.md measures random vocoders of each size.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import sys
import tempfile
from pathlib import Path

import torch
import torch.nn.functional as F

from wavern.errors import ParameterError

__all__ = ["hidden_stats", "group_costs", "shrink_vocoder", "main"]

log = logging.getLogger(__name__)


@torch.no_grad()
def hidden_stats(trainer) -> dict[str, torch.Tensor]:
    """Means (and the heads' standard deviations) over the trainer's held-out batches, teacher forced."""
    m = trainer.model.eval()
    H = m.config.hidden_size
    hs = []
    for batch in trainer.eval_batches():
        mel, audio, prev, past, lpc, phase = trainer._to_tensors(batch)
        h = m.hidden(mel, audio, prev_audio=prev, mel_pad=trainer.mel_pad, past=past, lpc=lpc, phase=phase)
        hs.append(h.reshape(-1, H).float())
    h = torch.cat(hs)
    a1, a3 = F.relu(m.O1(h[:, :H // 2])), F.relu(m.O3(h[:, H // 2:]))
    return {"h_mean": h.mean(0), "o1_mean": a1.mean(0), "o1_sd": a1.std(0), "o3_mean": a3.mean(0),
            "o3_sd": a3.std(0)}


def group_costs(trainer, stats: dict[str, torch.Tensor], base: float | None = None) -> list[float]:
    """Held-out loss increase of each unit group held at its mean (:func:`~wavern.vocoder.pruning.hold_at_mean`),
    one group at a time, over ``base`` (the unchanged model's held-out loss; measured when not given)."""
    from wavern.vocoder.pruning import hold_at_mean, unit_group

    m = trainer.model
    g = unit_group(m.config)
    saved = {k: v.clone() for k, v in m.state_dict().items()}
    if base is None:
        base = trainer.evaluate()["eval_loss"]
    costs = []
    try:
        for d in range(m.config.hidden_size // g):
            hold_at_mean(m, [d], stats["h_mean"])
            costs.append(trainer.evaluate()["eval_loss"] - base)
            m.load_state_dict(saved)
            log.info("unit group %d: held-out loss +%.4f", d, costs[-1])
    finally:
        m.load_state_dict(saved)
    return costs


def _trainer(cfg):
    """A trainer of ``cfg`` in a scratch run folder; it never trains."""
    from wavern.training.vocoder_trainer import VocoderTrainer

    return VocoderTrainer(dataclasses.replace(cfg, run_dir=tempfile.mkdtemp(prefix="wavern-shrink-"),
                                              init_from=None, resume=False))


def shrink_vocoder(source: str | Path, out_dir: str | Path, *, to_hidden: int, cfg, voice: str | Path) -> dict:
    """Measure, choose, shrink, write (module docstring); returns what ``shrink.json`` holds.

    ``cfg``: the :class:`~wavern.training.vocoder_trainer.VocoderTrainConfig` the source was trained
    with (its data, model and held-out batches; its run folder is not touched)."""
    from wavern.conditioning.config import AcousticConfig
    from wavern.conditioning.export import load_acoustic
    from wavern.training.voice import assemble_voice
    from wavern.vocoder.pruning import shrink_hidden, unit_group

    H, g = cfg.vocoder.hidden_size, unit_group(cfg.vocoder)
    if not 0 < to_hidden < H or (H - to_hidden) % (2 * g):
        raise ParameterError(f"--to-hidden {to_hidden}: must be below {H} by a multiple of {2 * g} "
                             f"(whole groups of {g} units from each half)")
    tr = _trainer(cfg)
    tr.load(source, exact=False)
    tr.open_data()
    k = (H - to_hidden) // (2 * g)
    stats = hidden_stats(tr)
    before = tr.evaluate()["eval_loss"]
    costs = group_costs(tr, stats, base=before)
    n_half = H // 2 // g
    coarse = sorted(range(n_half), key=lambda d: (costs[d], d))[:k]
    fine = sorted(range(n_half, 2 * n_half), key=lambda d: (costs[d], d))[:k]
    small, record = shrink_hidden(tr.model, coarse + fine, stats)

    after = tr.evaluate(model=small)["eval_loss"]  # the smaller model on the same held-out batches

    voice = Path(voice)
    meta = json.loads((voice / "voice.json").read_text())
    acoustic = load_acoustic(voice / "acoustic.safetensors", AcousticConfig.from_dict(meta["acoustic"]))
    prov = dict(meta.get("provenance", {}))
    prov["vocoder"] = {"step": int(tr.step), "checkpoint": str(source), "shrunk": record,
                       "held_out_loss": {"before": round(before, 4), "after": round(after, 4)}}
    out = Path(out_dir)
    assemble_voice(out, acoustic=acoustic, vocoder=small.eval(), symbols=meta["symbols"], name=meta["name"],
                   espeak_voice=meta["espeak_voice"], provenance=prov, inference=meta["inference"],
                   card=(voice / "MODEL_CARD.md").read_text())
    report = {**record, "source": str(source), "step": int(tr.step), "costs": [round(c, 5) for c in costs],
              "held_out_loss_before": before, "held_out_loss_after": after}
    (out / "shrink.json").write_text(json.dumps(report, indent=2) + "\n")
    log.info("%s: H %d -> %d, groups %s, held-out loss %.4f -> %.4f", out, H, to_hidden, coarse + fine,
             before, after)
    return report


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    own, options = (argv[:argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv else (argv, [])
    p = argparse.ArgumentParser(prog="python -m wavern.training.shrink", description=__doc__.split("\n\n")[0])
    p.add_argument("source", help="vocoder checkpoint (full or compact) or voice folder")
    p.add_argument("out", help="voice folder to write")
    p.add_argument("--to-hidden", type=int, required=True)
    p.add_argument("--voice", default=str(Path(__file__).resolve().parent.parent / "assets" / "voices" / "default"),
                   help="voice folder whose acoustic model, symbols and card go with it")
    a = p.parse_args(own)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from wavern.training.vocoder_options import parse_args

    try:
        cfg = parse_args(options)
        shrink_vocoder(a.source, a.out, to_hidden=a.to_hidden, cfg=cfg, voice=a.voice)
    except ParameterError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
