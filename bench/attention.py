"""Benchmark Longformer attention: wavern against Hugging Face, compiled flex_attention, dense SDPA.

Usage (results and the exact command are kept in docs/bench/attention.md)::

    .venv/bin/python bench/attention.py                 # the full table (about half an hour)
    .venv/bin/python bench/attention.py --sizes 512,2048 --configs 256x4   # a quick look

Every implementation computes the same thing (window 256, a few global tokens, Hugging Face
semantics) on one thread, and the first size of each configuration checks that they agree.

* ``layer``: x (1, N, D) -> (1, N, D): the five full projections (q, k, v, k_global,
  v_global), q_global on the global rows, the attention and the output projection.
  ``hf`` is ``transformers``' ``LongformerSelfAttention`` followed by the same output
  projection; ``flex`` and ``sdpa`` use wavern's projections around their attention.
* ``core``: the attention alone on one given (1, heads, N, head_dim) tensor used as q, k,
  v and their global counterparts (Hugging Face with its projections replaced by copies).

Times: median over ``--repeats`` runs after one warm-up, wall clock and CPU time of the
process (the machine is shared: CPU time does not count the time another job holds the
core). Memory: peak bytes held by torch's CPU allocator during one call, from the profiler's
allocation events (inputs and weights, allocated before, are not counted). ``fwd`` runs
under ``torch.no_grad()``; ``fwd+bwd`` backpropagates a random output gradient to the inputs
(and, in ``layer``, the weights). Compiled flex_attention has no backward on the CPU; its
block mask is built outside the timed call, as is the dense mask of ``sdpa``.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from wavern.conditioning.attention import LongformerSelfAttention, longformer_attention

Impl = Callable[[], Tensor]


def _heads(x: Tensor, h: int) -> Tensor:
    b, n, dim = x.shape
    return x.view(b, n, h, dim // h).transpose(1, 2)


def _merge(x: Tensor) -> Tensor:
    b, h, n, d = x.shape
    return x.transpose(1, 2).reshape(b, n, h * d)


def _with_global_rows(local: Tensor, q_g: Tensor, k_g: Tensor, v_g: Tensor, pos: Tensor) -> Tensor:
    """Replace the rows at global positions ``pos`` with Q_g K_g V_g attention (B = 1)."""
    s = (q_g[:, :, pos] / math.sqrt(q_g.shape[-1])) @ k_g.transpose(-1, -2)
    rows = torch.softmax(s, dim=-1) @ v_g  # (1, h, G, d)
    heads = torch.arange(local.shape[1])[:, None]
    return local[0].index_put((heads, pos[None, :]), rows[0])[None]


class _Case:
    """One (D, heads, N): weights, inputs and the four implementations."""

    def __init__(self, dim: int, heads: int, n: int, window: int, n_global: int):
        torch.manual_seed(0)
        self.dim, self.heads, self.n, self.window = dim, heads, n, window
        self.layer = LongformerSelfAttention(dim, heads, window)
        self.x = torch.randn(1, n, dim)
        self.pos = torch.arange(n_global) * (n // n_global)
        self.glob = torch.zeros(1, n, dtype=torch.bool)
        self.glob[0, self.pos] = True
        self.grad_out = torch.randn(1, n, dim)
        self._hf = self._flex = self._flex_mask = self._dense_mask = None

    # --- the attention cores on (1, h, N, d) tensors ---------------------------------------

    def core_wavern(self, q, k, v, q_g, k_g, v_g) -> Tensor:
        window, glob = self.window, self.glob
        return longformer_attention(q, k, v, q_g, k_g, v_g, window=window, global_mask=glob)

    def core_flex(self, q, k, v, q_g, k_g, v_g) -> Tensor:
        if self._flex is None:
            from torch.nn.attention.flex_attention import create_block_mask, flex_attention

            half, glob = self.window // 2, self.glob

            def mask_mod(b, h, q_idx, kv_idx):
                return ((q_idx - kv_idx).abs() <= half) | glob[b, kv_idx]

            self._flex_mask = create_block_mask(mask_mod, 1, None, self.n, self.n, device="cpu")
            self._flex = _compiled_flex(flex_attention)
        # Contiguous copies: given the projections' strided views, the compiled call took
        # 3.4 GB and 60x the time at N = 8192 here.
        q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
        local = self._flex(q, k, v, block_mask=self._flex_mask)
        return _with_global_rows(local, q_g, k_g, v_g, self.pos)

    def core_sdpa(self, q, k, v, q_g, k_g, v_g) -> Tensor:
        if self._dense_mask is None:
            i = torch.arange(self.n)
            band = (i[:, None] - i[None, :]).abs() <= self.window // 2
            self._dense_mask = (band | self.glob[0][None, :])[None, None]  # (1, 1, N, N)
        local = F.scaled_dot_product_attention(q, k, v, attn_mask=self._dense_mask)
        return _with_global_rows(local, q_g, k_g, v_g, self.pos)

    def core_hf(self, q, k, v, q_g, k_g, v_g) -> Tensor:
        hf = self._hf_module(identity=True)
        x = _merge(q)  # identities for projections: q = k = v = q_g = k_g = v_g = x
        return _heads(self._hf_call(hf, x), self.heads)

    # --- the layers ----------------------------------------------------------------------------

    def layer_wavern(self, x: Tensor) -> Tensor:
        return self.layer(x, global_mask=self.glob)

    def _layer_via(self, core, x: Tensor) -> Tensor:
        m, h = self.layer, self.heads
        q, k, v = _heads(m.query(x), h), _heads(m.key(x), h), _heads(m.value(x), h)
        k_g, v_g = _heads(m.key_global(x), h), _heads(m.value_global(x), h)
        q_g = torch.zeros_like(q)
        q_g[:, :, self.pos] = _heads(m.query_global(x[:, self.pos]), h)
        return m.out(_merge(core(q, k, v, q_g, k_g, v_g)))

    def layer_flex(self, x: Tensor) -> Tensor:
        return self._layer_via(self.core_flex, x)

    def layer_sdpa(self, x: Tensor) -> Tensor:
        return self._layer_via(self.core_sdpa, x)

    def layer_hf(self, x: Tensor) -> Tensor:
        return self.layer.out(self._hf_call(self._hf_module(identity=False), x))

    def _hf_module(self, *, identity: bool) -> nn.Module:
        from transformers import LongformerConfig
        from transformers.models.longformer.modeling_longformer import (
            LongformerSelfAttention as HFSelfAttention,
        )

        if self._hf is None or self._hf[0] != identity:
            config = LongformerConfig(
                hidden_size=self.dim,
                num_attention_heads=self.heads,
                attention_window=[self.window],
                attention_probs_dropout_prob=0.0,
            )
            hf = HFSelfAttention(config, layer_id=0)
            state = {k: v for k, v in self.layer.state_dict().items() if not k.startswith("out.")}
            hf.load_state_dict(state)
            if identity:
                for name in ("query", "key", "value", "query_global", "key_global", "value_global"):
                    setattr(hf, name, _Copy())  # a copy: it scales its query in place
            self._hf = (identity, hf)
        return self._hf[1]

    def _hf_call(self, hf: nn.Module, x: Tensor) -> Tensor:
        mask = self.glob.float() * 10000.0  # its convention: +10000 global, 0 local, -10000 pad
        (out,) = hf(
            x,
            attention_mask=mask,
            is_index_masked=mask < 0,
            is_index_global_attn=mask > 0,
            is_global_attn=True,
        )
        return out


class _Copy(nn.Module):
    def forward(self, x: Tensor) -> Tensor:
        return x.clone()


_FLEX = None


def _compiled_flex(flex_attention):
    global _FLEX
    if _FLEX is None:  # recompiles for each shape (dynamic shapes hit an inductor bug here)
        _FLEX = torch.compile(flex_attention, dynamic=False)
    return _FLEX


def _runner(case: _Case, level: str, impl: str, mode: str) -> Impl:
    """A zero-argument call that runs one forward (and backward)."""
    grad = mode == "fwd+bwd"
    if level == "layer":
        fn = getattr(case, f"layer_{impl}")
        x = case.x.clone().requires_grad_(grad)
        params = list(case.layer.parameters())

        def call():
            if not grad:
                with torch.no_grad():
                    return fn(x)
            for p in params:
                p.grad = None
            x.grad = None
            y = fn(x)
            y.backward(case.grad_out)
            return y

        return call
    fn = getattr(case, f"core_{impl}")
    d = case.dim // case.heads
    gen = torch.Generator().manual_seed(1)
    # One tensor for all six, as Hugging Face with identity projections reads it.
    tensors = [torch.randn(1, case.heads, case.n, d, generator=gen).requires_grad_(grad)] * 6
    grad_out = torch.randn(1, case.heads, case.n, d, generator=gen)

    def call():
        if not grad:
            with torch.no_grad():
                return fn(*tensors)
        for t in tensors:
            t.grad = None
        y = fn(*tensors)
        y.backward(grad_out)
        return y

    return call


def _time(call: Impl, repeats: int, slow_s: float) -> tuple[float, float]:
    """(median wall s, median CPU s) after one warm-up; one run if the warm-up was slow."""
    t0 = time.perf_counter()
    call()
    if time.perf_counter() - t0 > slow_s:
        repeats = 1
    walls, cpus = [], []
    for _ in range(repeats):
        w, c = time.perf_counter(), time.process_time()
        call()
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c)
    return statistics.median(walls), statistics.median(cpus)


def _peak_mib(call: Impl) -> float:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        call()
    events = [e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"]
    events.sort(key=lambda e: e.start_ns())
    held = peak = 0
    for e in events:
        held += e.nbytes()
        peak = max(peak, held)
    return peak / 2**20


def _available(impl: str) -> bool:
    if impl == "hf":
        try:
            import transformers.models.longformer.modeling_longformer  # noqa: F401
        except ImportError:
            print("skipping hf: `pip install transformers` (the bench extra)", file=sys.stderr)
            return False
    if impl == "flex":
        try:
            from torch.nn.attention.flex_attention import flex_attention  # noqa: F401
        except ImportError:
            print("skipping flex: this torch has no flex_attention", file=sys.stderr)
            return False
    return True


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="512,2048,8192,16384")
    ap.add_argument("--configs", default="256x4,768x12", help="DxHEADS,...")
    ap.add_argument("--levels", default="core,layer")
    ap.add_argument("--impls", default="wavern,hf,flex,sdpa")
    ap.add_argument("--window", type=int, default=256)
    ap.add_argument("--globals", type=int, default=4, dest="n_global")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--slow-s", type=float, default=8.0, help="one timed run past this warm-up")
    ap.add_argument("--dense-max-n", type=int, default=16384, help="largest N for sdpa")
    ap.add_argument("--dense-bwd-max-n", type=int, default=8192, help="largest N for sdpa fwd+bwd")
    ap.add_argument("--no-memory", action="store_true")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    sizes = [int(s) for s in args.sizes.split(",")]
    impls = [i for i in args.impls.split(",") if _available(i)]
    print(f"# torch {torch.__version__}, 1 thread, window {args.window}, {args.n_global} global")
    print("level | D/heads | N | impl | mode | wall s | CPU s | peak MiB")
    print("---|---|---|---|---|---|---|---")
    for level in args.levels.split(","):
        for config in args.configs.split(","):
            dim, heads = (int(v) for v in config.split("x"))
            for n in sizes:
                case = _Case(dim, heads, n, args.window, args.n_global)
                if n == sizes[0]:
                    outs = {i: _runner(case, level, i, "fwd")().detach() for i in impls}
                    diffs = {i: float((o - outs[impls[0]]).abs().max()) for i, o in outs.items()}
                    print(f"<!-- {level} {config} N={n}: max |diff| vs {impls[0]}: {diffs} -->")
                for impl in impls:
                    for mode in ("fwd", "fwd+bwd"):
                        if impl == "flex" and mode == "fwd+bwd":
                            continue  # no backward on the CPU
                        if impl == "sdpa" and n > (
                            args.dense_bwd_max_n if mode == "fwd+bwd" else args.dense_max_n
                        ):
                            continue
                        call = _runner(case, level, impl, mode)
                        wall, cpu = _time(call, args.repeats, args.slow_s)
                        peak = float("nan") if args.no_memory else _peak_mib(call)
                        print(
                            f"{level} | {dim}/{heads} | {n} | {impl} | {mode} | "
                            f"{wall:.3f} | {cpu:.3f} | {peak:.0f}",
                            flush=True,
                        )
                del case


if __name__ == "__main__":
    main()
