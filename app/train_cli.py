"""`wavern train MODEL`: the command-line face of the trainers in ``wavern.training``.

Each trainer takes one dataclass config. The common flags below map onto its fields by
name; any other field is set with ``--set name=value`` (parsed as JSON when it can be, else
as a string). An unknown field is refused with the list of known ones.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from typing import Any

from wavern.app.argtypes import float_in
from wavern.errors import ParameterError

__all__ = ["add_train_parsers", "run_train", "config_from_args"]

# model name -> (module, config class, train function, what it does)
TRAINERS: dict[str, tuple[str, str, str, str]] = {
    "vocoder": ("wavern.training.vocoder_trainer", "VocoderTrainConfig", "train_vocoder",
                "train the WaveRNN vocoder on a corpus (teacher forcing, block pruning)"),
    "acoustic": ("wavern.training.acoustic_trainer", "AcousticTrainConfig", "train_acoustic",
                 "train the text → mel acoustic model (encoder, durations, decoder)"),
    "pretrain": ("wavern.training.pretrain", "PretrainConfig", "pretrain_encoder",
                 "replaced-token-detection pre-training of the text encoder"),
    "voice": ("wavern.training.voice", "VoiceBuildConfig", "build_voice",
              "build a whole voice: corpus, acoustic model, vocoder, prune, export, evaluate; the voice goes "
              "to assets/voices/<name>/ (preset 'default': over the shipped default voice; "
              "--set out_dir=FOLDER elsewhere, e.g. ~/.local/share/wavern/voices/NAME)"),
}

_COMMON = [
    # flag, field, type, help
    ("--corpus", "corpus_dir", str, "corpus folder (from `wavern corpus build`)"),
    ("--run-dir", "run_dir", str, "where checkpoints and metrics.jsonl go"),
    ("--steps", "steps", int, "total optimiser steps"),
    ("--batch-size", "batch_size", int, "examples per step"),
    ("--lr", "lr", float_in(0.0, 1e6, above=True), "learning rate"),  # (inf started training, died at step 1)
    ("--optimizer", "optimizer", str, "adam | yellowfin"),
    ("--device", "device", str, "cpu | cuda | auto"),
    ("--threads", "threads", int, "torch CPU threads"),
    ("--seed", "seed", int, "random seed (same seed, same run)"),
]


# A flag's field may be spelled differently by a trainer (e.g. run_dir vs out_dir).
_ALIASES = {"run_dir": ("run_dir", "out_dir")}
# The common flags a trainer's config has no field for (its --help does not offer them; a test
# checks this against the configs): the whole-voice build sets steps and rates per stage (--set).
_WITHOUT = {"voice": {"--steps", "--batch-size", "--lr", "--optimizer"}}
# A common flag that means something else for one trainer.
_HELP = {("voice", "--run-dir"): "the folder of the acoustic/ and vocoder/ run folders (default: runs/)"}


def add_train_parsers(sub: argparse._SubParsersAction) -> None:
    for name, (_, _, _, what) in TRAINERS.items():
        p = sub.add_parser(name, help=what, description=what + ". Fields not covered by a flag: --set name=value.")
        for flag, field, typ, help_ in _COMMON:
            if flag not in _WITHOUT.get(name, ()):
                p.add_argument(flag, dest=field, type=typ, default=None, help=_HELP.get((name, flag), help_))
        p.add_argument("--resume", action="store_true", help="continue from the run dir's last checkpoint (the "
                       "acoustic, pretrain and voice trainers do so by default)")
        p.add_argument("--fresh", action="store_true", help="start afresh even where the run dir has a checkpoint")
        p.add_argument("--set", dest="overrides", action="append", default=[], metavar="NAME=VALUE",
                       help="set any other config field")


def _parse_value(raw: str) -> Any:
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


def config_from_args(cls: type, args: argparse.Namespace) -> Any:
    """Build the trainer's dataclass config from the common flags and ``--set`` overrides."""
    fields = {f.name for f in dataclasses.fields(cls)}
    values: dict[str, Any] = {}
    for _, field, _, _ in _COMMON:
        v = getattr(args, field, None)
        if v is not None:
            name = next((a for a in _ALIASES.get(field, (field,)) if a in fields), None)
            if name is None:
                raise ParameterError(f"this trainer has no '{field}' setting")
            values[name] = v
    if getattr(args, "resume", False) and getattr(args, "fresh", False):
        raise ParameterError("--resume and --fresh contradict each other")
    for flag, value in (("resume", True), ("fresh", False)):
        if getattr(args, flag, False):
            if "resume" not in fields:
                raise ParameterError(f"this trainer has no --{flag}")
            values["resume"] = value
            if flag == "fresh" and "fresh" in fields:  # (the vocoder trainer refuses a used run dir without it)
                values["fresh"] = True
    for item in args.overrides:
        if "=" not in item:
            raise ParameterError(f"--set expects NAME=VALUE, found {item!r}")
        k, raw = item.split("=", 1)
        k = k.strip().replace("-", "_")
        if k not in fields:
            raise ParameterError(f"unknown setting '{k}'; known: {', '.join(sorted(fields))}")
        values[k] = _checked_value(cls, k, _parse_value(raw))
    missing = [f.name for f in dataclasses.fields(cls) if f.name not in values
               and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    if missing:
        flags = {field: flag for flag, field, _, _ in _COMMON}
        hint = ", ".join(f"{flags[m]}" if m in flags else f"--set {m}=..." for m in
                         (next((f for f, names in _ALIASES.items() if m in names), m) for m in missing))
        raise ParameterError(f"missing required setting(s) {', '.join(missing)}: give {hint}")
    return cls(**values)


def _checked_value(cls: type, name: str, value: Any) -> Any:
    """A ``--set`` value whose type cannot be the field's (a word for a number) is refused here, not
    deep inside the trainer."""
    field = next(f for f in dataclasses.fields(cls) if f.name == name)
    default = field.default
    if isinstance(default, bool):
        ok = isinstance(value, bool)
    elif isinstance(default, (int, float)):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) \
            and (isinstance(default, float) or isinstance(value, int))
    else:
        return value
    if not ok:
        raise ParameterError(f"--set {name}: expected {type(default).__name__} like {default!r}, found {value!r}")
    return value



def run_train(args: argparse.Namespace) -> int:
    import importlib

    module_name, cls_name, fn_name, _ = TRAINERS[args.model]
    module = importlib.import_module(module_name)
    cfg = config_from_args(getattr(module, cls_name), args)
    result = getattr(module, fn_name)(cfg)
    if isinstance(result, dict):
        print(json.dumps(result, indent=2, default=str))
    return 0
