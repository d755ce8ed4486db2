"""Two processes on localhost: gradients are averaged (identical weights after a step, equal to
the single-process step on the union of the data) and only rank 0 writes the checkpoint."""

import os
import socket

import pytest
import torch
import torch.multiprocessing as mp

from wavern.training.distributed import (DistInfo, average_gradients, broadcast_parameters, init_distributed,
                                         pick_device, shutdown)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _model(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))


def _data():
    g = torch.Generator().manual_seed(123)
    return torch.randn(8, 4, generator=g), torch.randn(8, 1, generator=g)


def _worker(rank, world, port, out_dir):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world),
                      LOCAL_RANK=str(rank))
    torch.set_num_threads(1)
    info = init_distributed(torch.device("cpu"))
    model = _model(seed=100 + rank)  # different init per rank: broadcast must fix it
    broadcast_parameters(model, info)
    x, y = _data()
    xs, ys = x[rank::world], y[rank::world]  # each rank its own half of the batch
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = torch.nn.functional.mse_loss(model(xs), ys)
    loss.backward()
    average_gradients(model, info)
    opt.step()
    torch.save({k: v.clone() for k, v in model.state_dict().items()}, os.path.join(out_dir, f"weights{rank}.pt"))
    if info.is_main:
        torch.save(model.state_dict(), os.path.join(out_dir, "checkpoint.pt"))
    shutdown(info)


def test_two_processes_average_gradients(tmp_path):
    world = 2
    mp.spawn(_worker, args=(world, _free_port(), str(tmp_path)), nprocs=world, join=True)
    w0 = torch.load(tmp_path / "weights0.pt")
    w1 = torch.load(tmp_path / "weights1.pt")
    for k in w0:
        torch.testing.assert_close(w0[k], w1[k], rtol=0, atol=0)
    # Reference: one process, rank 0's init, the mean of the two halves' losses (= DDP's averaged gradient).
    model = _model(seed=100)
    x, y = _data()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = sum(torch.nn.functional.mse_loss(model(x[r::world]), y[r::world]) for r in range(world)) / world
    loss.backward()
    opt.step()
    for k, v in model.state_dict().items():
        torch.testing.assert_close(w0[k], v, rtol=1e-6, atol=1e-7)
    assert (tmp_path / "checkpoint.pt").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint.pt", "weights0.pt", "weights1.pt"]


def test_single_process_is_a_no_op(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    info = init_distributed()
    assert info == DistInfo() and not info.enabled and info.is_main
    m = _model(0)
    m(torch.randn(2, 4)).sum().backward()
    before = [p.grad.clone() for p in m.parameters()]
    average_gradients(m, info)
    for b, p in zip(before, m.parameters()):
        assert torch.equal(b, p.grad)


def test_pick_device():
    assert pick_device("cpu").type == "cpu"
    assert pick_device("auto").type in ("cpu", "cuda")
    if not torch.cuda.is_available():
        from wavern.errors import ParameterError
        with pytest.raises(ParameterError, match="no CUDA"):
            pick_device("cuda")


def test_documented_torchrun_commands_reach_the_trainer_intact():
    """torchrun's own parser must leave every trainer option to the trainer: a bare ``--run`` was
    taken as an abbreviation of torchrun's ``--run-path`` and refused."""
    from torch.distributed.run import get_args_parser

    from wavern.training import vocoder_trainer as vt

    trainer_args = ["--corpus", "data/corpus", "--run-dir", "runs/vocoder", "--batch", "32", "--threads", "1",
                    "--hidden", "384", "--log-every", "10", "--resume"]
    args = get_args_parser().parse_args(["--standalone", "--nproc-per-node", "2", "-m",
                                         "wavern.training.vocoder_trainer", *trainer_args])
    assert args.module and args.training_script == "wavern.training.vocoder_trainer"
    assert args.training_script_args == trainer_args
    cfg = vt._parse(args.training_script_args)
    assert cfg.run_dir == "runs/vocoder" and cfg.batch_size == 32 and cfg.resume
    assert vt._parse(["--run", "x"]).run_dir == "x"  # the old spelling still works outside torchrun


def _step_worker(rank, world, port, steps, out_dir):
    from wavern.training.distributed import check_same_step

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world),
                      LOCAL_RANK=str(rank))
    info = init_distributed(torch.device("cpu"), timeout_s=60)
    outcome = []
    for case in steps:  # one collective per case, on every rank
        try:
            check_same_step(case[rank], info)
            outcome.append("ok")
        except Exception as e:
            outcome.append(f"{type(e).__name__}: {e}")
    with open(os.path.join(out_dir, f"rank{rank}.txt"), "w") as f:
        f.write("\n".join(outcome))
    shutdown(info)


def test_ranks_that_resumed_at_different_steps_all_refuse_to_train(tmp_path):
    # a rank on another machine without the run folder starts at 0 while rank 0 resumes
    world, steps = 3, [(7, 7, 7), (7, 0, 7), (0, 100, 200), (0, 0, 0)]
    mp.spawn(_step_worker, args=(world, _free_port(), steps, str(tmp_path)), nprocs=world, join=True)
    for r in range(world):
        got = (tmp_path / f"rank{r}.txt").read_text().splitlines()
        assert got[0] == "ok" and got[3] == "ok", got
        assert all(g.startswith("ParameterError: the ranks resumed at different steps") for g in got[1:3]), got
