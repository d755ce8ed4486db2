"""Ground-truth-aligned (GTA) mels: the acoustic model's prediction, forced to the corpus timing.

End to end, the vocoder hears the acoustic model's mel, which is smoother and a little wrong
compared with the true mel it is trained on. Tacotron 2's remedy: also train the vocoder on the
acoustic model's teacher-forced output, which lines up frame for frame with the true audio
because the durations are the corpus's own. :func:`build_gta_mels` writes that mel for every
utterance of a vocoder cache (``wavern.training.vocoder_data``), in the cache's own frame order,
as ``gta_mels.npy`` beside ``mels.npy``; the vocoder trainer mixes it in with ``--gta-prob``.

    python -m wavern.training.gta runs/vocoder/cache runs/acoustic/checkpoint.pt [--corpus data/corpus]

Utterances of speakers the acoustic model does not know keep their true mel. Regenerate after
the acoustic model has trained on (the file records the checkpoint's step).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path

import numpy as np
import torch

from wavern.errors import CorpusError, ParameterError

__all__ = ["build_gta_mels", "GTA_FILE"]

log = logging.getLogger(__name__)

GTA_FILE = "gta_mels.npy"


@torch.no_grad()
def build_gta_mels(cache_dir: str | os.PathLike, acoustic_checkpoint: str | os.PathLike, *,
                   corpus_dir: str | os.PathLike = "data/corpus") -> Path:
    """Write ``cache_dir/gta_mels.npy`` (same shape as ``mels.npy``) and ``gta_mels.json``."""
    from wavern.conditioning.acoustic import frames_from_samples
    from wavern.conditioning.frontend.phonemes import SymbolTable
    from wavern.training.acoustic_trainer import corpus_global_mask, load_checkpoint, prosody_of
    from wavern.training.corpus import load_corpus

    cache_dir = Path(cache_dir)
    index = json.loads((cache_dir / "index.json").read_text())
    mels = np.load(cache_dir / "mels.npy", mmap_mode="r")
    model, ck = load_checkpoint(acoustic_checkpoint)
    corpus = load_corpus(corpus_dir)
    records = {r.id: r for r in [*corpus.train, *corpus.held_out]}
    table = SymbolTable(json.loads((Path(corpus_dir) / "corpus.json").read_text())["symbols"])
    speakers = model.config.speakers
    hop = index["fingerprint"]["hop_length"]
    tmp = cache_dir / (GTA_FILE + ".tmp")
    out = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.float32, shape=mels.shape)
    f_off = index["frame_offsets"]
    predicted = 0
    for i, uid in enumerate(index["ids"]):
        lo, hi = f_off[i], f_off[i + 1]
        r = records.get(uid)
        if r is None:
            raise CorpusError(f"cache utterance {uid!r} is not in the corpus at {corpus_dir}")
        if r.phonemes is None or r.durations is None or r.voice not in speakers:
            out[lo:hi] = mels[lo:hi]
            continue
        frames = frames_from_samples(r.durations, hi - lo, hop=hop)
        ids = torch.as_tensor(table.encode(r.phonemes))[None]
        glob = torch.as_tensor(corpus_global_mask(r.phonemes))[None]
        mel = model(ids, glob, torch.as_tensor(frames)[None], speaker=torch.tensor([speakers.index(r.voice)]),
                    prosody=torch.as_tensor(prosody_of(r))[None]).mel[0]
        if mel.shape[0] != hi - lo:
            raise ParameterError(f"utterance {uid!r}: GTA mel has {mel.shape[0]} frames, the cache {hi - lo}")
        out[lo:hi] = mel[:, :mels.shape[1]].numpy()  # a pitch model's pitch features stay the truth's
        predicted += 1
    out.flush()
    del out
    os.replace(tmp, cache_dir / GTA_FILE)
    (cache_dir / "gta_mels.json").write_text(json.dumps(
        {"acoustic_checkpoint": str(acoustic_checkpoint), "acoustic_step": int(ck.get("step", 0)),
         "predicted_utterances": predicted, "utterances": len(index["ids"])}))
    log.info("GTA mels for %d of %d utterances in %s", predicted, len(index["ids"]), cache_dir / GTA_FILE)
    return cache_dir / GTA_FILE


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    p = argparse.ArgumentParser(prog="python -m wavern.training.gta", description=__doc__.splitlines()[0])
    p.add_argument("cache", help="the vocoder run's cache folder (runs/vocoder/cache)")
    p.add_argument("acoustic_checkpoint")
    p.add_argument("--corpus", default="data/corpus")
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)
    try:
        build_gta_mels(a.cache, a.acoustic_checkpoint, corpus_dir=a.corpus)
    except (ParameterError, CorpusError) as e:
        print(f"gta: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
