"""compact_checkpoint: bfloat16 tensors, RNG dropped, and the trainers' load path accepts it."""

import torch

from wavern.training.common import atomic_save, compact_checkpoint


def test_compact_checkpoint_round_trip(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 4)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for _ in range(3):
        opt.zero_grad()
        model(torch.randn(5, 8)).pow(2).mean().backward()
        opt.step()
    full = {"step": 3, "model": model.state_dict(), "optimizer": opt.state_dict(),
            "rng": {"torch": torch.get_rng_state()}}
    atomic_save(full, tmp_path / "full.pt")
    compact_checkpoint(tmp_path / "full.pt", tmp_path / "compact.pt")
    ck = torch.load(tmp_path / "compact.pt", weights_only=False)
    assert "rng" not in ck and ck["step"] == 3
    assert all(v.dtype == torch.bfloat16 for v in ck["model"].values())
    exp_avg_sq = ck["optimizer"]["state"][0]["exp_avg_sq"]
    assert exp_avg_sq.dtype == torch.bfloat16 and bool((exp_avg_sq > 0).all())  # tiny moments survive
    m2 = torch.nn.Linear(8, 4)
    m2.load_state_dict(ck["model"])
    o2 = torch.optim.Adam(m2.parameters(), lr=1e-3)
    o2.load_state_dict(ck["optimizer"])
    assert o2.state[m2.weight]["exp_avg"].dtype == torch.float32  # cast back to the parameter's dtype
    torch.testing.assert_close(m2.weight, model.weight, rtol=1e-2, atol=1e-2)
    assert (tmp_path / "compact.pt").stat().st_size < (tmp_path / "full.pt").stat().st_size
