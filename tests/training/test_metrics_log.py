"""MetricsLog: the JSONL file and its TensorBoard mirror hold the same numbers."""

import json
import math

import pytest

from wavern.training.common import MetricsLog

pytest.importorskip("tensorboard")
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402


def _scalars(folder):
    acc = EventAccumulator(str(folder))
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def test_rows_are_mirrored_as_scalars(tmp_path):
    log = MetricsLog(tmp_path / "metrics.jsonl", tensorboard=True)
    rows = [{"kind": "train", "step": s, "loss": 1.0 / s, "lr": 1e-3, "note": "text is skipped"} for s in (1, 2, 3)]
    rows.append({"kind": "eval", "step": 3, "eval_loss": 0.25, "bad": math.nan, "flag": True})
    for r in rows:
        log.write(r)
    log.close()
    assert [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()] == \
        [json.loads(json.dumps(r, sort_keys=True)) for r in rows]
    sc = _scalars(tmp_path / "tensorboard")
    assert sorted(sc) == ["eval/eval_loss", "train/loss", "train/lr"]
    assert [s for s, _ in sc["train/loss"]] == [1, 2, 3]
    assert [v for _, v in sc["train/loss"]] == pytest.approx([1.0, 0.5, 1 / 3], rel=1e-6)
    assert sc["eval/eval_loss"] == [(3, 0.25)]


def test_resume_purges_events_after_the_checkpoint(tmp_path):
    first = MetricsLog(tmp_path / "metrics.jsonl", tensorboard=True)
    for s in range(1, 6):
        first.write({"kind": "train", "step": s, "loss": float(s)})
    first.close()
    again = MetricsLog(tmp_path / "metrics.jsonl", tensorboard=True)
    again.truncate_after(3)  # the run resumes from its step-3 checkpoint
    for s in (4, 5):
        again.write({"kind": "train", "step": s, "loss": 10.0 * s})
    again.close()
    assert [r["loss"] for r in again.read()] == [1.0, 2.0, 3.0, 40.0, 50.0]
    assert _scalars(tmp_path / "tensorboard")["train/loss"] == [(1, 1.0), (2, 2.0), (3, 3.0), (4, 40.0), (5, 50.0)]


def test_no_mirror_when_switched_off(tmp_path):
    log = MetricsLog(tmp_path / "metrics.jsonl", tensorboard=False)
    log.write({"kind": "train", "step": 1, "loss": 1.0})
    log.close()
    assert not (tmp_path / "tensorboard").exists()


def test_a_full_disk_while_writing_metrics_is_a_disk_full_error(tmp_path, monkeypatch):
    import errno
    from pathlib import Path

    from wavern.errors import DiskFullError

    log = MetricsLog(tmp_path / "metrics.jsonl", tensorboard=False)
    log.write({"kind": "train", "step": 1, "loss": 1.0})

    def full(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Path, "open", full)
    with pytest.raises(DiskFullError, match="disk full while writing metrics"):
        log.write({"kind": "train", "step": 2, "loss": 0.5})
