"""The real trainers, data-parallel over 2 processes on localhost (gloo), against one process.

One spawn runs, in each of 2 processes: the acoustic trainer (Adam) straight for 4 steps, and
for 2 steps resumed to 4; replaced-token pre-training (YellowFin, text and bimodal rows, the
text cache written by rank 0) for 4 steps; the vocoder trainer (Adam, block pruning, the data
cache built by rank 0) for 8 steps. Checked: both ranks end with identical weights; the
2-process runs equal (to float tolerance) 1-process runs of the same global batch (5 examples:
3 + 2 rows, 3 vocoder segments: 2 + 1, so the loss weighting across unequal shares is
exercised); the logged losses are the global batch's; resume under torchrun is bit-exact; only
rank 0 wrote files.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import socket
from pathlib import Path

import pytest
import torch
import torch.multiprocessing as mp

from test_acoustic_trainer import _cfg, _fake_corpus, _model_cfg
from test_vocoder_trainer import _cfg as _vocoder_config
from test_vocoder_trainer import _corpus as _tone_corpus
from wavern.training import acoustic_trainer as at
from wavern.training import pretrain as pt
from wavern.training import vocoder_trainer as vt
from wavern.training.common import MetricsLog
from wavern.training.distributed import DistInfo, init_distributed, loss_weights, shutdown

WORLD = 2
BATCH = 5  # uneven: rank 0 gets rows 0, 2, 4 and rank 1 rows 1, 3
STEPS = 4
# the metrics' TensorBoard mirror (rank 0's, like every other file) when tensorboard is installed
TB = ["tensorboard"] if importlib.util.find_spec("tensorboard") else []


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _config(corpus, out, **kw) -> at.AcousticTrainConfig:
    # No dropout: with it, each rank draws its own masks and the runs differ by design.
    model = _model_cfg()
    model = dataclasses.replace(model, dropout=0.0, encoder=dataclasses.replace(model.encoder, dropout=0.0))
    return _cfg(corpus, out, **{"model": model, "batch_size": BATCH, "steps": STEPS, **kw})


def _pretrain_config(corpus, out) -> pt.PretrainConfig:
    return pt.PretrainConfig(corpus_dir=str(corpus), run_dir=str(out), encoder=_config(corpus, out).model.encoder,
                             sentences_path=str(corpus / "sentences.txt"), text_voices=("en-us",),
                             bimodal_fraction=0.6, optimizer="yellowfin", steps=STEPS, batch_size=BATCH,
                             log_every=1, eval_sequences=2, progress=False, checkpoint_every_s=1e9, export=False)


def _worker(rank: int, world: int, port: int, corpus: str, root: str, tones: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world),
                      LOCAL_RANK=str(rank))
    torch.set_num_threads(1)
    info = init_distributed(torch.device("cpu"), timeout_s=120)  # the trainer joins this group, leaves it open
    seen = []
    real = at.broadcast_parameters  # the same function in both trainers

    def spy(model, dist_info):  # the trainer hands its model to this once per run, before step 1
        seen.append(model)
        real(model, dist_info)
        if len(seen) == 1:
            torch.save({k: v.clone() for k, v in model.state_dict().items()},
                       os.path.join(root, "weights", f"init-rank{rank}.pt"))

    at.broadcast_parameters = pt.broadcast_parameters = spy
    for name, steps in (("straight", STEPS), ("resumed", 2), ("resumed", STEPS)):
        at.train_acoustic(_config(corpus, os.path.join(root, name), steps=steps))
        torch.save({k: v.clone() for k, v in seen[-1].state_dict().items()},
                   os.path.join(root, "weights", f"{name}{steps}-rank{rank}.pt"))
    pt.pretrain_encoder(_pretrain_config(Path(corpus), os.path.join(root, "pretrain")))
    torch.save({k: v.clone() for k, v in seen[-1].state_dict().items()},
               os.path.join(root, "weights", f"pretrain-rank{rank}.pt"))
    trainer = vt.train_vocoder(_vocoder_config(tones, Path(root) / "vocoder" / "run"))
    torch.save(trainer.model.state_dict(), os.path.join(root, "weights", f"vocoder-rank{rank}.pt"))
    shutdown(info)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("dp")
    corpus = _fake_corpus(root / "corpus")
    (corpus / "sentences.txt").write_text("The cat sat on the mat.\nA dog ran home.\nShips sail at night.\n"
                                          "We met at noon today.\nNine men came in.\n", encoding="utf-8")
    (root / "weights").mkdir()
    _tone_corpus(root / "tones")
    mp.spawn(_worker, args=(WORLD, _free_port(), str(corpus), str(root), str(root / "tones")), nprocs=WORLD,
             join=True)
    return root, corpus


def _weights(root, name):
    return [torch.load(root / "weights" / f"{name}-rank{r}.pt", weights_only=True) for r in range(WORLD)]


def test_ranks_hold_identical_weights(runs):
    root, _ = runs
    for name in (f"straight{STEPS}", "resumed2", f"resumed{STEPS}"):
        w0, w1 = _weights(root, name)
        for k in w0:
            assert torch.equal(w0[k], w1[k]), (name, k)


def test_two_processes_equal_one_process_on_the_same_global_batch(runs, tmp_path, monkeypatch):
    root, corpus = runs
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    single = at.train_acoustic(_config(corpus, tmp_path / "single"))
    assert single.step == STEPS
    ref = torch.load(tmp_path / "single" / "checkpoint.pt", weights_only=True)["model"]
    dp = torch.load(root / "straight" / "checkpoint.pt", weights_only=True)["model"]
    init = _weights(root, "init")[0]
    assert torch.equal(dp["mel_mean"], ref["mel_mean"]) and torch.equal(init["mel_mean"], ref["mel_mean"])
    for k, v in ref.items():
        if k.endswith("key.bias"):
            # A key bias shifts every score of a query equally: softmax ignores it, its true
            # gradient is 0 and both runs hold rounding noise there, which Adam scales up to ~lr.
            continue
        torch.testing.assert_close(dp[k], v, rtol=1e-4, atol=1e-5, msg=k)
    # ... while the steps moved the weights far more than that tolerance
    assert float((ref["mel_out.weight"] - init["mel_out.weight"]).abs().max()) > 5e-3
    assert float((ref["encoder.embed.weight"] - init["encoder.embed.weight"]).abs().max()) > 5e-3
    rows_dp = [r for r in MetricsLog(root / "straight" / "metrics.jsonl").read() if r["kind"] == "train"]
    rows_1 = [r for r in MetricsLog(tmp_path / "single" / "metrics.jsonl").read() if r["kind"] == "train"]
    assert [r["step"] for r in rows_dp] == list(range(1, STEPS + 1))  # written once, by rank 0
    for a, b in zip(rows_dp, rows_1):
        for key in ("loss", "mel_l1", "duration_mse"):
            assert a[key] == pytest.approx(b[key], rel=1e-5), (a["step"], key)


def test_resume_under_torchrun_is_bit_exact(runs):
    root, _ = runs
    straight, resumed = _weights(root, f"straight{STEPS}")[0], _weights(root, f"resumed{STEPS}")[0]
    for k in straight:
        assert torch.equal(straight[k], resumed[k]), k
    ckpt = torch.load(root / "resumed" / "checkpoint.pt", weights_only=True)
    assert ckpt["step"] == STEPS
    rows = [r["step"] for r in MetricsLog(root / "resumed" / "metrics.jsonl").read() if r["kind"] == "train"]
    assert rows == list(range(1, STEPS + 1))


def test_only_rank_zero_writes(runs):
    root, _ = runs
    for name in ("straight", "resumed"):
        assert sorted(p.name for p in (root / name).iterdir()) == sorted(
            ["checkpoint.pt", "metrics.jsonl", "train_config.json", *TB])


def test_pretraining_in_two_processes_equals_one_process(runs, tmp_path, monkeypatch):
    root, corpus = runs
    w0, w1 = _weights(root, "pretrain")
    for k in w0:
        assert torch.equal(w0[k], w1[k]), k
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    single = pt.pretrain_encoder(_pretrain_config(corpus, tmp_path / "single"))
    assert single.step == STEPS
    ref = torch.load(tmp_path / "single" / "checkpoint.pt", weights_only=True)["model"]
    dp = torch.load(root / "pretrain" / "checkpoint.pt", weights_only=True)["model"]
    for k, v in ref.items():
        torch.testing.assert_close(dp[k], v, rtol=1e-4, atol=1e-6, msg=k)
    rows_dp = [r for r in MetricsLog(root / "pretrain" / "metrics.jsonl").read() if r["kind"] == "train"]
    rows_1 = [r for r in MetricsLog(tmp_path / "single" / "metrics.jsonl").read() if r["kind"] == "train"]
    assert [r["step"] for r in rows_dp] == list(range(1, STEPS + 1))
    for a, b in zip(rows_dp, rows_1):
        for key in ("total", "text_rtd", "audio_rtd", "mlm"):
            assert a[key] == pytest.approx(b[key], rel=1e-5), (a["step"], key)
    assert sorted(p.name for p in (root / "pretrain").iterdir()) == sorted(
        ["checkpoint.pt", "metrics.jsonl", "text_cache.npz", "train_config.json", *TB])


def test_vocoder_in_two_processes_equals_one_process(runs, tmp_path, monkeypatch):
    root, _ = runs
    w0, w1 = _weights(root, "vocoder")
    for k in w0:
        assert torch.equal(w0[k], w1[k]), k
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    single = vt.train_vocoder(_vocoder_config(root / "tones", tmp_path / "run"))
    ref = single.model.state_dict()
    assert single.pruner.density() < 1.0  # pruning ran: masks from the (equal) weights on every rank
    for k, v in ref.items():
        torch.testing.assert_close(w0[k], v, rtol=1e-4, atol=1e-5, msg=k)
    run = root / "vocoder" / "run"
    rows_dp = [r for r in MetricsLog(run / "metrics.jsonl").read() if r["kind"] == "train"]
    rows_1 = [r for r in MetricsLog(tmp_path / "run" / "metrics.jsonl").read() if r["kind"] == "train"]
    assert [r["step"] for r in rows_dp] == [r["step"] for r in rows_1] == [2, 4, 6, 8]
    for a, b in zip(rows_dp, rows_1):
        for key in ("loss", "coarse", "fine"):
            assert a[key] == pytest.approx(b[key], rel=1e-5), (a["step"], key)
    assert sorted(p.name for p in run.iterdir()) == sorted(
        ["checkpoint.pt", "compact.pt", "metrics.jsonl", "train_config.json", "vocoder.safetensors",
         "vocoder_config.json", *TB])


def test_loss_weights_alone_are_one():
    assert loss_weights([3.0, 7.0], DistInfo()) == [1.0, 1.0]
    assert DistInfo(rank=1, world_size=2).rows(5).tolist() == [1, 3]


def _nan_worker(rank: int, world: int, port: int, tones: str, root: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world),
                      LOCAL_RANK=str(rank))
    torch.set_num_threads(1)
    info = init_distributed(torch.device("cpu"), timeout_s=120)

    def poison(trainer, row):  # from step 3 on, rank 1 alone sees a NaN loss
        if rank == 1 and trainer.step == 2:
            real = trainer.model.loss
            trainer.model.loss = lambda *a, **k: real(*a, **k)._replace(total=torch.tensor(float("nan")))

    try:
        vt.train_vocoder(_vocoder_config(tones, Path(root) / "run"), on_step=poison)
        outcome = "finished"
    except FloatingPointError as e:
        outcome = f"FloatingPointError {e}"
    except Exception as e:  # the old trainers: the healthy rank's collective failed
        outcome = f"{type(e).__name__} {e}"
    Path(root, f"rank{rank}.txt").write_text(outcome)
    # Every rank stops at the same step (what the test asserts), so all reach the barrier. Then leave
    # without the interpreter's teardown: about one run in twenty, a rank that had written its
    # outcome died in it of SIGABRT ("terminate called without an active exception", a C++ thread
    # still joinable at exit), which failed the spawn though every rank had done what is tested.
    shutdown(info, wait=True)
    os._exit(0)


def test_a_nan_loss_on_one_rank_stops_every_rank_with_the_same_error(tmp_path):
    _tone_corpus(tmp_path / "tones")
    mp.spawn(_nan_worker, args=(WORLD, _free_port(), str(tmp_path / "tones"), str(tmp_path)), nprocs=WORLD,
             join=True)
    for r in range(WORLD):
        outcome = (tmp_path / f"rank{r}.txt").read_text()
        assert outcome.startswith("FloatingPointError") and "at step 2" in outcome, (r, outcome)
    assert not (tmp_path / "run" / "checkpoint.pt").exists()  # nothing saved from the poisoned step
