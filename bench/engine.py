"""Engine benchmark: the numba WaveRNN kernels against a plain torch loop -> docs/bench/engine.md.

    .venv/bin/python bench/engine.py             # everything (a few minutes), writes the doc
    .venv/bin/python bench/engine.py --quick     # fewer samples and runs, same tables
    .venv/bin/python bench/engine.py --blocks    # only the block-shape matvec tables, with the roofline (no doc)
    .venv/bin/python bench/engine.py --avx2 [--against REV]   # only the goal row, native and as AVX2 code (no doc)

Random vocoders (fan-in scaled weights, float16 values as in a voice file, blocks pruned at random
to the density) stand in for trained ones: speed depends on shapes and density only. Times are CPU time (of the generating
thread, or summed over the threads for batched rendering): the machine is shared with a training
run, so wall time would mostly measure the neighbours. Batched rendering also reports wall time.
Medians of several runs.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import shlex  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

from wavern.engine import kernels as K  # noqa: E402  (first: numba must see NUMBA_SLP_VECTORIZE)
from wavern.engine.vocoder import _MATS as _MAT_PLACES  # noqa: E402
from wavern.engine.vocoder import Vocoder, to_engine  # noqa: E402

import numba  # noqa: E402
import numpy as np  # noqa: E402

import wavern  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import machine  # noqa: E402
import roofline  # noqa: E402
from checkout import ENGINE_FOLDERS, export_checkout, resolve_commit  # noqa: E402
from goal_row import COND_BLOCKS, SR, engine_speed, goal_vocoder, random_mel, random_vocoder  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


# ---- engine -------------------------------------------------------------------------------------

VOICE = ROOT / "assets" / "voices" / "default"
VOICE_TEXT = ("The old lighthouse keeper walked down to the harbour every morning, "
              "long before the fishing boats came back with the tide.")


def voice_text_mel(v) -> np.ndarray:
    """The acoustic model's mel of :data:`VOICE_TEXT` for voice ``v``, its default speaker."""
    parts = v.sentence_parts(VOICE_TEXT, speaker=v.resolve_speaker(None), speed=1.0)
    return np.concatenate([p.part.mel for p in parts])


def voice_speed(runs: int, seconds: float | None = None) -> dict:
    """The shipped voice's own vocoder, one stream, on the acoustic model's mel of
    :data:`VOICE_TEXT`: samples per CPU-second of ``Vocoder.generate`` as the voice runs it (for an
    LPC voice the synthesis filter, with period inputs the residual taps, inside the loop), and
    of its network alone (``kernels._generate`` on the gate columns, the one-stream layout: what
    a random vocoder of its shape measures in the table above), and of the voice's whole waveform
    stage (that audio then ``Voice.apply_postfilter``: the post-filter and mel matching, as
    rendering runs them). Each run makes the whole sentence (``seconds``: only its first
    ``seconds`` of audio); the rows alternate, run by run, so that a noisy neighbour slows them
    alike. Medians of ``runs``, with the slowest and fastest. Keys ``full_int8``, ``stage_int8``:
    the same voice with the int8 products on its state (``Voice.load(int8=True)``), in the same runs."""
    from wavern.engine.voice import Voice

    v = Voice.load(VOICE, int8=False)
    v8 = Voice.load(VOICE, int8=True)
    try:
        mel = voice_text_mel(v)
        voc = v.vocoder
        gi = voc.frame_inputs(mel)
        g3 = np.ascontiguousarray(gi[:, :3 * voc.hidden_size])
        n = gi.shape[0] * voc.hop if seconds is None else min(gi.shape[0] * voc.hop, int(seconds * SR))
        none = np.zeros((0, 2, K.N_CLASSES), np.float32)
        rates: dict[str, list[float]] = {"full": [], "net": [], "stage": [], "full_int8": [], "stage_int8": []}

        def waveform(voice) -> tuple[float, float]:
            """samples per CPU-second of ``generate``, and of it with the post-filter and mel matching"""
            st = voice.vocoder.new_state(seed=1)
            t = time.thread_time()
            audio = voice.vocoder.generate(gi, st, n)
            gen_s = time.thread_time() - t
            t = time.thread_time()
            voice.apply_postfilter(audio, mel[:-(-n // voc.hop)])  # the voice's post-filter and mel matching
            return n / gen_s, n / (gen_s + time.thread_time() - t)

        for r in range(runs + 1):
            full, stage = waveform(v)
            st = voc.new_state(seed=1)
            out = np.zeros(n, np.int16)
            t = time.thread_time()
            K._generate(g3, 0, 0, voc.hop, voc.stream_net, np.float32(1.0), st.h, st.prev, st.rng, out, none, st.work)
            net = n / (time.thread_time() - t)
            full8, stage8 = waveform(v8)
            if r:  # the first round warms the caches
                for key, value in (("full", full), ("stage", stage), ("net", net), ("full_int8", full8),
                                   ("stage_int8", stage8)):
                    rates[key].append(value)
        out = {k: float(np.median(x)) for k, x in rates.items()}
        out.update({f"{k}_range": (float(min(x)), float(max(x))) for k, x in rates.items()})
        out.update({"hidden": voc.hidden_size, "weights": voc.flops_per_sample / 2, "lpc": voc.lpc_order,
                    "taps": int(voc._w_back.shape[0]), "frames": mel.shape[0], "seconds": n / SR, "runs": runs,
                    "passes": v.melmatch.config.iterations if v.melmatch is not None else 0})
        return out
    finally:
        v.close()
        v8.close()


# ---- where a sample's time goes ---------------------------------------------------------------------

def pieces_table(runs: int) -> dict:
    """``sample_pieces`` for the goal row (H 512, 10 %, one stream; and with the int8 products), the
    shipped voice as one stream (on :data:`VOICE_TEXT`'s mel) and as 16 streams stream-major, as
    rendering runs it (16 segments of 40 + 4 frames of that sentence, each from its own place)."""
    import sample_pieces  # here: it needs this checkout's kernels, and --batch-json runs against older ones

    from wavern.engine.voice import Voice

    out = {"goal": sample_pieces.one_stream(*goal_vocoder(), runs=runs),
           "goal_int8": sample_pieces.one_stream(*goal_vocoder(int8=True), runs=runs)}
    v = Voice.load(VOICE, int8=False)
    try:
        voc = v.vocoder
        gi = voc.frame_inputs(voice_text_mel(v))
        out["voice"] = sample_pieces.one_stream(voc, gi, runs=runs)
        seg, B = 44, 16
        starts = np.linspace(0, gi.shape[0] - seg, B).astype(int)
        gis = np.ascontiguousarray(np.stack([gi[a:a + seg] for a in starts]))
        out["batch"] = sample_pieces.streams(voc, gis, runs=runs)
        out["hidden"] = voc.hidden_size
    finally:
        v.close()
    return out


def pieces_lines(pc: dict) -> list[str]:
    cols = (("goal", "H 512 / 10 %, one stream"), ("goal_int8", "the same, int8 products"),
            ("voice", f"shipped voice (H {pc['hidden']}), one stream"),
            ("batch", "shipped voice, 16 streams stream-major, per stream"))
    lines = ["| piece | " + " | ".join(label for _, label in cols) + " |", "|---|" + "---:|" * len(cols)]
    from sample_pieces import PIECES

    for name in (*PIECES, "rest", "whole"):
        cells = [f"{pc[k][name]:.2f} us ({100 * pc[k][name] / pc[k]['whole']:.0f} %)" if name != "whole"
                 else f"**{pc[k][name]:.2f} us**" for k, _ in cols]
        label = {"rest": "the rest (period inputs, synthesis, the loop itself)", "whole": "the whole loop"}.get(name, name)
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return lines


# ---- the plain torch loop ------------------------------------------------------------------------

def torch_speed(dense: dict, sparse: dict, gi: np.ndarray, n: int, runs: int) -> float:
    """Samples per CPU-second of a straightforward torch per-sample loop (dense weights, one
    thread): one torch op per step of docs/ARCHITECTURE.md, sampling by the same inverse CDF."""
    import torch

    torch.set_num_threads(1)
    f = lambda a: torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32))  # noqa: E731
    whh = f(sparse["gru.weight_hh"].to_dense())
    H = whh.shape[1]
    hh = H // 2
    O = {k: f(sparse[k].to_dense()) for k in ("O1", "O2", "O3", "O4")}
    b = {k: f(dense[f"{k}.bias"]) for k in ("O1", "O2", "O3", "O4")}
    bhh, w_in = f(dense["gru.bias_hh"]), f(dense["gru.weight_ih"][:, :3])
    rows_c = torch.cat([torch.arange(g * H, g * H + hh) for g in range(3)])
    rows_f = rows_c + hh
    gi_t = f(gi)
    u = K.uniforms(K.rng_state(1), n).tolist()

    def half(x: torch.Tensor, gh: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        r = torch.sigmoid(x[:hh] + gh[:hh])
        z = torch.sigmoid(x[hh:2 * hh] + gh[hh:2 * hh])
        return (1 - z) * torch.tanh(x[2 * hh:] + r * gh[2 * hh:]) + z * h

    def draw(logits: torch.Tensor, uu: float) -> int:
        cs = torch.cumsum(torch.softmax(logits, 0), 0)
        return min(int(torch.searchsorted(cs, torch.tensor([uu * float(cs[-1])]), right=True)), 255)

    def run() -> float:
        h = torch.zeros(H)
        c, fb = 128, 0
        t0 = time.thread_time()
        with torch.no_grad():
            for t in range(n):
                gh = torch.mv(whh, h) + bhh
                x = gi_t[t // 256] + w_in[:, 0] * (c / 127.5 - 1) + w_in[:, 1] * (fb / 127.5 - 1)
                hc = half(x[rows_c], gh[rows_c], h[:hh])
                c = draw(torch.mv(O["O2"], torch.relu(torch.mv(O["O1"], hc) + b["O1"])) + b["O2"], u[t][0])
                xf = x[rows_f] + w_in[rows_f, 2] * (c / 127.5 - 1)
                hf = half(xf, gh[rows_f], h[hh:])
                fb = draw(torch.mv(O["O4"], torch.relu(torch.mv(O["O3"], hf) + b["O3"])) + b["O4"], u[t][1])
                h = torch.cat([hc, hf])
        return n / (time.thread_time() - t0)

    run()  # warm
    return float(np.median([run() for _ in range(runs)]))


# ---- block shapes --------------------------------------------------------------------------------

@numba.njit(nogil=True, cache=True)
def _repeat_spmv(mat, x, y, reps):  # pragma: no cover - compiled
    for _ in range(reps):
        K._spmv(mat, x, 0, y)  # as the generating loops call it: from compiled code, no Python call between


def _time_matvec(mat: tuple, rows: int, cols: int, runs: int, ceiling=None) -> tuple[float, float | None]:
    """Matvecs per CPU-second of the kernel itself (``K._spmv`` called in a compiled loop), median of
    ``runs``; with ``ceiling`` (a function that measures once), also its median, measured between
    the matvec's runs (so both see the core at the same clock: a ceiling measured a minute apart
    came out 10 % under the matvec)."""
    rng = np.random.default_rng(1)
    x = (rng.standard_normal(cols) * 1e-3).astype(np.float32)  # (y grows by M x a call: it stays small)
    y = np.zeros(rows, np.float32)
    _repeat_spmv(mat, x, y, 1)
    reps = max(1, int(0.05 / (2 * mat[0].size / 20e9)))  # ~50 ms a run at 20 GFLOP/s
    res, ceil = [], []
    for _ in range(runs):
        t = time.thread_time()
        _repeat_spmv(mat, x, y, reps)
        res.append(reps / (time.thread_time() - t))
        if ceiling is not None:
            ceil.append(ceiling())
    return float(np.median(res)), (float(np.median(ceil)) if ceil else None)


def _bound_row(name: str, mat: tuple, rows: int, cols: int, runs: int, fma: float, bw: dict) -> dict:
    """One row of the block tables: effective GFLOP/s, us per matvec, bytes, and the roofline bound
    (float16 weights: with the widening ceiling, measured between the matvec's runs)."""
    flops = 2 * mat[0].size
    half = mat[0].dtype == np.uint16
    per_s, widen = _time_matvec(mat, rows, cols, runs, (lambda: roofline.half_fma_gflops(1)) if half else None)
    nbytes = roofline.matvec_bytes(mat, rows, cols)
    if nbytes not in bw:
        bw[nbytes] = roofline.read_gbps(nbytes, runs)
    bound, by = roofline.matvec_bound(flops, nbytes, fma, bw[nbytes], widen)
    gf = per_s * flops / 1e9
    return {"name": name, "gflops": gf, "us": 1e6 / per_s, "kb": nbytes / 1024, "gbps": bw[nbytes],
            "bound": bound, "by": by, "fraction": gf / bound, "widen": widen}


def block_table(runs: int) -> dict:
    """Effective GFLOP/s of one 3H x H matvec (H = 512, 10 % of blocks) per engine block shape, with
    float32 and with float16 weights, and of the shipped voice's own matrices as its one stream holds
    them; each with the core's bound (:mod:`roofline`). ``{"fma": GFLOP/s, "widen": GFLOP/s (median over the
    float16 rows), "rows": [...], "voice":
    [...]}``; ``rows[i]["kind"]`` is the engine block kind of the float32 rows."""
    fma = roofline.fma_gflops(runs)
    bw: dict[int, float] = {}
    rng = np.random.default_rng(0)
    H = 512
    rows = []
    for kind, (br, bc) in enumerate(K.BLOCK_SHAPES):
        keep = rng.random((3 * H // br, H // bc)) < 0.1
        m = (rng.standard_normal((3 * H, H)) * 0.05).astype(np.float16).astype(np.float32) \
            * np.kron(keep, np.ones((br, bc), np.float32))
        for half in (False, True):
            row = _bound_row(f"{br}x{bc}", to_engine(m, kind=kind, half=half), 3 * H, H, runs, fma, bw)
            rows.append(dict(row, kind=kind, weights="float16" if half else "float32"))
    voice = []
    if VOICE.is_dir():
        from wavern.engine.voice import Voice

        with Voice.load(VOICE, int8=False) as v:
            voc = v.vocoder
            names = dict(zip(_MAT_PLACES, ("W_hh", "O1", "O2", "O3", "O4")))
            for i, name in names.items():
                mat = voc.stream_net[i]
                shape = {"W_hh": (3 * voc.hidden_size, voc.hidden_size), "O1": (voc.hidden_size // 2,) * 2,
                         "O3": (voc.hidden_size // 2,) * 2, "O2": (K.N_CLASSES, voc.hidden_size // 2),
                         "O4": (K.N_CLASSES, voc.hidden_size // 2)}[name]
                br, bc = K.BLOCK_SHAPES[mat[3] % K.FLAT]
                layout = f"{br}x{bc}" + (" flat" if mat[3] >= K.FLAT else "")
                row = _bound_row(name, mat, *shape, runs, fma, bw)
                density = mat[1].size * br * bc / (shape[0] * shape[1])
                voice.append(dict(row, layout=layout, shape=f"{shape[0]} x {shape[1]}", density=density,
                                  weights="float16" if mat[0].dtype == np.uint16 else "float32"))
    widen = float(np.median([r["widen"] for r in rows + voice if r["widen"] is not None]))
    return {"fma": fma, "widen": widen, "rows": rows, "voice": voice}


def block_lines(blocks: dict) -> list[str]:
    """The block tables in markdown."""
    lines = ["| engine block | weights | eff. GFLOP/s | us per matvec | kB read | read GB/s at that size | bound GFLOP/s "
             "| bound by | of the bound |", "|---|---|---:|---:|---:|---:|---:|---|---:|"]
    for r in blocks["rows"]:
        lines.append(f"| {r['name']} | {r['weights']} | {r['gflops']:.1f} | {r['us']:.2f} | {r['kb']:.0f} | "
                     f"{r['gbps']:.0f} | {r['bound']:.0f} | {r['by']} | {100 * r['fraction']:.0f} % |")
    if blocks["voice"]:
        lines += ["", "The shipped voice's matrices as its one stream holds them (`Vocoder.stream_net`):", "",
                  "| matrix | shape | stored density | engine layout | weights | eff. GFLOP/s | us per matvec | kB read "
                  "| read GB/s at that size | bound GFLOP/s | bound by | of the bound |",
                  "|---|---|---:|---|---|---:|---:|---:|---:|---:|---|---:|"]
        for r in blocks["voice"]:
            lines.append(f"| {r['name']} | {r['shape']} | {100 * r['density']:.1f} % | {r['layout']} | {r['weights']} | "
                         f"{r['gflops']:.1f} | {r['us']:.2f} | {r['kb']:.0f} | {r['gbps']:.0f} | {r['bound']:.0f} | "
                         f"{r['by']} | {100 * r['fraction']:.0f} % |")
        lines += ["", "A matrix of a few kB sits in L1, where the sum that measures bandwidth is itself bound by its "
                      "loop (so the bound is low, if anything); the output layers' small matvecs, a few dozen blocks "
                      "each, reach none of these ceilings: their loop's overhead costs more than their FMAs."]
    return lines


# ---- batched, folded rendering -------------------------------------------------------------------

def batched_table(H: int, density: float, seconds: float, runs: int) -> list[tuple[str, float, float]]:
    """(mode, x real time per CPU-second of all threads, x real time by wall clock) of Vocoder.render."""
    dense, sparse = random_vocoder(H, density)
    voc = Vocoder(dense, sparse, cond_blocks=COND_BLOCKS)
    frames = int(seconds * SR / 256)
    mel = random_mel(frames, seed=2)
    audio_s = frames * 256 / SR
    rows = []
    for label, kw in (("one stream (no fold)", dict(fold_frames=None)),
                      ("folded batch, 1 thread", dict(fold_frames=40, overlap_frames=4, threads=1)),
                      ("folded batch, 2 threads", dict(fold_frames=40, overlap_frames=4, threads=2))):
        voc.render(mel[:50], **kw)
        cpus, walls = [], []
        for _ in range(runs):
            t, c = time.perf_counter(), time.process_time()
            voc.render(mel, seed=1, **kw)
            walls.append(time.perf_counter() - t)
            cpus.append(time.process_time() - c)
        rows.append((label, audio_s / float(np.median(cpus)), audio_s / float(np.median(walls))))
    return rows


# ---- batches: generate_batch per stream, and render, against an older checkout ---------------------

BATCH_SIZES = (1, 4, 8, 16, 32)
BATCH_HIDDEN = (384, 512)


def batch_costs(runs: int, n_samples: int, render_s: float) -> dict[str, float]:
    """Per-stream cost of ``Vocoder.generate_batch`` and the speed of ``Vocoder.render``.

    Keys: ``"H{H} B{B}"`` microseconds of the generating thread's CPU per sample per stream (B
    streams, each on its own frames; median of ``runs``), ``"H{H} single"`` the same for
    ``Vocoder.generate``, ``"H{H} render {s}s"`` seconds of audio per CPU-second of
    ``Vocoder.render`` (s = ``render_s`` and 3 ``render_s`` seconds of mel, fold 40 + 4 frames, so
    about 2 and 6 segments per second of audio in one batch; one thread). Uses only API that existed
    before the lane kernel, so an older checkout runs it too (see :func:`batch_compare`).
    """
    K.warmup()
    out = {}
    for H in BATCH_HIDDEN:
        dense, sparse = random_vocoder(H, 0.1)
        voc = Vocoder(dense, sparse, cond_blocks=COND_BLOCKS)
        frames = -(-n_samples // 256) + 1
        gi_all = voc.frame_inputs(random_mel(frames * max(BATCH_SIZES), seed=1))
        for B in BATCH_SIZES:
            gis = np.ascontiguousarray(gi_all[:frames * B].reshape(B, frames, -1))
            rngs = K.rng_states(1, B)
            voc.generate_batch(gis, voc.new_batch_state(rngs), 256)
            cpu = []
            for _ in range(runs):
                st = voc.new_batch_state(rngs)
                t = time.thread_time()
                voc.generate_batch(gis, st, n_samples)
                cpu.append(time.thread_time() - t)
            out[f"H{H} B{B}"] = float(np.median(cpu)) / n_samples / B * 1e6
        gi1 = np.ascontiguousarray(gi_all[:frames])
        voc.generate(gi1, voc.new_state(seed=1), 256)
        cpu = []
        for _ in range(runs):
            st = voc.new_state(seed=1)
            t = time.thread_time()
            voc.generate(gi1, st, n_samples)
            cpu.append(time.thread_time() - t)
        out[f"H{H} single"] = float(np.median(cpu)) / n_samples * 1e6
        voc.render(random_mel(50, seed=2))
        for seconds in (render_s, 3 * render_s):
            mel = random_mel(int(seconds * SR / 256), seed=2)
            cpu = []
            for _ in range(runs):
                c = time.process_time()
                voc.render(mel, seed=1)
                cpu.append(time.process_time() - c)
            out[f"H{H} render {seconds:g}s"] = mel.shape[0] * 256 / SR / float(np.median(cpu))
    return out


def _own_cpu_choice(env: dict) -> dict:
    """``env`` without the NUMBA_CPU_FEATURES this process's wavern import set, so that a child
    process (this checkout, or an export of a revision older than f246db7, whose import does not
    know wavern's marker for it) chooses its own vector width."""
    if env.get("NUMBA_CPU_FEATURES") == wavern.wide_vector_features():
        del env["NUMBA_CPU_FEATURES"]
    return env


def batch_compare(ref: str, rounds: int, runs: int, n_samples: int, render_s: float
                  ) -> tuple[dict[str, float], dict[str, float]]:
    """:func:`batch_costs` of this checkout and of git revision ``ref``, each in ``rounds`` fresh
    processes taking turns (so both see the same load); returns (this, ref), medians over rounds."""
    args = [sys.executable, str(Path(__file__).resolve()), "--batch-json", "--runs", str(runs),
            "--samples", str(n_samples), "--render-s", str(render_s)]
    results: dict[str, list[dict[str, float]]] = {"this": [], "ref": []}
    with tempfile.TemporaryDirectory() as tmp:
        env_ref = _own_cpu_choice(dict(os.environ, PYTHONPATH=str(export_checkout(ref, Path(tmp), folders=ENGINE_FOLDERS))))
        for r in range(rounds):
            for which, env in (("ref", env_ref), ("this", dict(os.environ))):
                res = subprocess.run(args, cwd=tmp, env=env, capture_output=True, text=True, check=True)
                results[which].append(json.loads(res.stdout.strip().splitlines()[-1]))
                print(f"round {r + 1}/{rounds} {which}: done", flush=True)

    def med(rows: list[dict[str, float]]) -> dict[str, float]:
        return {k: float(np.median([row[k] for row in rows])) for k in rows[0]}

    return med(results["this"]), med(results["ref"])


def batch_lines(this: dict[str, float], ref: dict[str, float] | None, ref_name: str) -> list[str]:
    """Markdown table of :func:`batch_costs` results (with a before column when ``ref`` is given)."""
    head = "| H | streams B | us / sample / stream |" + (f" before ({ref_name}) | speed-up |" if ref else "")
    lines = [head, "|---:|---|---:|" + ("---:|---:|" if ref else "")]
    for H in BATCH_HIDDEN:
        for key, label in [(f"H{H} single", "1 (`generate`)")] + [(f"H{H} B{B}", str(B)) for B in BATCH_SIZES]:
            row = f"| {H} | {label} | {this[key]:.2f} |"
            if ref:
                row += f" {ref[key]:.2f} | {ref[key] / this[key]:.2f}x |"
            lines.append(row)
    extra = f" before ({ref_name}) | speed-up |" if ref else ""
    lines += ["", "| H | mel | segments (40 + 4 frames) | `Vocoder.render`, x real time per CPU-second |" + extra,
              "|---:|---:|---:|---:|" + ("---:|---:|" if ref else "")]
    for H in BATCH_HIDDEN:
        for key in sorted((k for k in this if k.startswith(f"H{H} render ")), key=lambda k: float(k.split()[-1][:-1])):
            seconds = float(key.split()[-1][:-1])
            row = f"| {H} | {seconds:g} s | {-(-int(seconds * SR / 256) // 40)} | {this[key]:.1f} |"
            if ref:
                row += f" {ref[key]:.1f} | {this[key] / ref[key]:.2f}x |"
            lines.append(row)
    return lines


# ---- the goal row as AVX2 code ---------------------------------------------------------------------

#: LLVM CPU targets without AVX-512, for the goal row compiled as an AVX2-only CPU gets it:
#: Intel's Haswell (AVX2, FMA), AMD's Zen 2 and Zen 3 (what numba compiles for on the Zen 3 of
#: :data:`AVX2_CPU_RUN`). They run on this CPU: the code is the AVX2 code such a CPU runs, its
#: caches and clock are this CPU's.
AVX2_TARGETS = ("haswell", "znver2", "znver3")


#: The last run of the goal row on an AVX2-only CPU: (revision, RTF, date, CPU). ``--avx2 --against``
#: that revision says how its goal row's speed compares with this checkout's on this CPU.
AVX2_CPU_RUN = ("58f9e0b", 0.149, "2026-12-02", "an AVX2-only AMD EPYC (Zen 3, family 25 model 1)")


def goal_rtf(target: str | None, runs: int, seconds: float, pythonpath: Path | None = None, *,
             int8: bool = False) -> float:
    """RTF of the goal shape (``bench/goal_row.py``: H 512, 10 %, one stream, CPU time, median of
    ``runs``) with the kernels compiled for LLVM CPU ``target`` (NUMBA_CPU_NAME; None: this CPU, as
    wavern compiles by default), in a fresh process with a numba cache of that target's own; with
    ``pythonpath``, the wavern exported there (:func:`checkout.export_checkout`) instead of this one;
    with ``int8``, the int8 products (``goal_row.py --int8``)."""
    env = _own_cpu_choice(dict(os.environ))
    if target is not None:
        env.pop("NUMBA_CPU_FEATURES", None)
        env.pop("WAVERN_NUMBA_CPU_FEATURES", None)
        env["NUMBA_CPU_NAME"] = target
        env["NUMBA_CACHE_DIR"] = str(Path(tempfile.gettempdir()) / f"wavern-numba-cache-{target}")
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    res = subprocess.run([sys.executable, str(Path(__file__).resolve().parent / "goal_row.py"), "--runs", str(runs),
                          "--seconds", str(seconds), *(["--int8"] if int8 else [])], env=env, capture_output=True, text=True,
                         cwd=tempfile.gettempdir())  # not the repository: its folders would shadow an export
    if res.returncode:
        raise RuntimeError(f"goal row for {target}: {res.stderr[-2000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])["rtf"]


def avx2_rows(rounds: int, seconds: float, against: str | None = None) -> dict:
    """The goal row's RTF natively and for each of :data:`AVX2_TARGETS`, ``rounds`` fresh processes
    each, the targets taking turns (order reversed every round); each process the median of 5 runs.
    Keys ``(target, "this")`` (target None: native), ``(target, "int8")`` (this checkout with the
    int8 products), and with ``against`` (a git revision) also ``(target, against)``: all
    taking turns."""
    targets = [None, *AVX2_TARGETS]
    sides: list[tuple[str | None, Path | None]] = [(None, None), ("int8", None)]
    if against:
        # a path that stays the same from run to run, so numba's cache of the export is reused
        sha = resolve_commit(against)
        if sha is None:
            raise SystemExit(f"--against {against}: not a commit of this clone's history")
        dest = Path(tempfile.gettempdir()) / f"wavern-export-{sha[:12]}"
        if not (dest / "complete").exists():
            shutil.rmtree(dest, ignore_errors=True)
            export_checkout(sha, dest, folders=ENGINE_FOLDERS)
            (dest / "complete").touch()
        sides.append((against, dest / "pkg"))
    runs = [(t, side, path) for t in targets for side, path in sides]
    for t, side, path in runs:  # compile (or load) each target's kernels once, not timed
        goal_rtf(t, 1, 0.05, path, int8=side == "int8")
    got: dict = {(t, side or "this"): [] for t, side, _ in runs}
    for i in range(rounds):
        for t, side, path in runs if i % 2 == 0 else runs[::-1]:
            got[(t, side or "this")].append(goal_rtf(t, 5, seconds, path, int8=side == "int8"))
    return got


def avx2_lines(got: dict, against: str | None) -> list[str]:
    """Sentences of :func:`avx2_rows`: each target's median RTF (fastest-slowest), and with ``against``
    that revision's beside it and the round-by-round ratio of this checkout's RTF to its (below 1:
    this checkout is faster); against :data:`AVX2_CPU_RUN`'s revision, what that CPU's figure
    scales to."""
    targets = [None, *AVX2_TARGETS]
    this = {t: got[(t, "this")] for t in targets}
    head = (f"The goal row natively and as AVX2-only code (`--avx2`: LLVM targets {', '.join(AVX2_TARGETS)}, on "
            f"this CPU), {len(this[None])} rounds of fresh processes taking turns, median RTF (fastest-slowest)")
    goal = "Goal (issue 41): <= 0.12 on AVX2-only CPUs as well as AVX-512 ones."
    if not against:
        return [head + ": " + "; ".join(f"{t or 'native'} **{statistics.median(r):.3f}** ({min(r):.3f}-{max(r):.3f})"
                                        for t, r in this.items()) + ". " + goal]
    ratio = {t: statistics.median(a / b for a, b in zip(this[t], got[(t, against)])) for t in targets}
    out = [head + f", this checkout / {against}: " + "; ".join(
        f"{t or 'native'} **{statistics.median(r):.3f}** ({min(r):.3f}-{max(r):.3f}) / "
        f"{statistics.median(got[(t, against)]):.3f}" for t, r in this.items())
        + "; this checkout's time over its, median of the rounds: " + ", ".join(f"{ratio[t]:.2f}" for t in targets)
        + ". " + goal]
    rev, rtf, day, cpu = AVX2_CPU_RUN
    if against == rev:
        avx = statistics.median([a / b for t in AVX2_TARGETS for a, b in zip(this[t], got[(t, against)])])
        out.append(f"{rev} is the last revision run on an AVX2-only CPU: {cpu} measured {rtf} on {day}. Scaled by "
                   f"the AVX2 code's ratio here ({avx:.2f}, all {len(AVX2_TARGETS)} targets), it would run this checkout's at about "
                   f"{rtf * avx:.3f}: an estimate, not a measurement.")
    return out + int8_lines(got, against)


def int8_lines(got: dict, against: str | None) -> list[str]:
    """The int8 side of :func:`avx2_rows`: its median RTF per target, its round-by-round ratio to
    this checkout's float16 row, and against :data:`AVX2_CPU_RUN`'s revision what that CPU's figure
    scales to."""
    targets = [None, *AVX2_TARGETS]
    if (None, "int8") not in got:
        return []
    q = {t: got[(t, "int8")] for t in targets}
    ratio = {t: statistics.median(a / b for a, b in zip(q[t], got[(t, "this")])) for t in targets}
    line = ("The same vocoder with int8 products on the state (`Vocoder(int8=True)`: W_hh, O1 and O3 in int8, the "
            "state in 8 bits), in the same rounds: " + "; ".join(
                f"{t or 'native'} **{statistics.median(r):.3f}** ({min(r):.3f}-{max(r):.3f}), "
                f"{ratio[t]:.2f} of the float16 row's time" for t, r in q.items()) + ".")
    rev, rtf, day, cpu = AVX2_CPU_RUN
    if against == rev:
        avx = statistics.median([a / b for t in AVX2_TARGETS for a, b in zip(q[t], got[(t, against)])])
        by = {t: statistics.median(a / b for a, b in zip(q[t], got[(t, against)])) for t in AVX2_TARGETS}
        line += (f" Over {rev}'s float16 row {avx:.2f} (all {len(AVX2_TARGETS)} AVX2 targets; "
                 + ", ".join(f"{t} {r:.2f}" for t, r in by.items()) + "), so that CPU would run it at about "
                 f"{rtf * avx:.3f} (by target " + ", ".join(f"{rtf * r:.3f}" for r in by.values())
                 + "): an estimate, not a measurement.")
    return [line]


# ---- cold / warm start -----------------------------------------------------------------------------

def start_times() -> list[tuple[float, float]]:
    """(wall, CPU) seconds to import the kernels and run warmup() with an empty numba cache, then
    with the cache filled by the first run."""
    code = ("import time; t, c = time.perf_counter(), time.process_time(); import wavern.engine.kernels as K; "
            "K.warmup(); print(time.perf_counter() - t, time.process_time() - c)")
    out = []
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache)
        for _ in range(2):
            res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
            wall, cpu = res.stdout.strip().splitlines()[-1].split()
            out.append((float(wall), float(cpu)))
    return out


# ---- report ----------------------------------------------------------------------------------------

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer samples and runs")
    ap.add_argument("--blocks", action="store_true", help="only the block-shape table, printed")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "bench" / "engine.md")
    ap.add_argument("--batch", action="store_true", help="only the batch table, printed")
    ap.add_argument("--voice", action="store_true", help="only the shipped voice's rows, printed")
    ap.add_argument("--against", metavar="REV", help="also measure the batch table (or with --avx2 the goal row) at git revision REV")
    ap.add_argument("--rounds", type=int, default=3, help="processes per checkout for --against")
    ap.add_argument("--batch-json", action="store_true", help=argparse.SUPPRESS)  # one batch_costs, as JSON
    ap.add_argument("--avx2", action="store_true", help="only the goal row, native and as AVX2 code, printed")
    ap.add_argument("--pieces", action="store_true", help="only where a sample's time goes, printed")
    ap.add_argument("--runs", type=int, default=5, help=argparse.SUPPRESS)
    ap.add_argument("--samples", type=int, default=4096, help=argparse.SUPPRESS)
    ap.add_argument("--render-s", type=float, default=10.0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.batch_json:
        print(json.dumps(batch_costs(args.runs, args.samples, args.render_s)))
        return 0
    if args.avx2:
        load_before = os.getloadavg()
        rounds = 3 if args.quick else 5
        got = avx2_rows(rounds, 0.4, args.against)
        for (target, side), rtfs in got.items():
            print(f"H 512 / 10 %, {target or 'native'}, {side}: RTF median {statistics.median(rtfs):.3f} "
                  f"({', '.join(f'{r:.3f}' for r in rtfs)})")
        print("\n".join(avx2_lines(got, args.against)))
        print(f"load average {load_before[0]:.1f} before, {os.getloadavg()[0]:.1f} after")
        return 0
    runs = 3 if args.quick else 5
    if args.pieces:
        print("\n".join(pieces_lines(pieces_table(runs))))
        print(f"load average {os.getloadavg()[0]:.1f}")
        return 0
    batch_kw = dict(runs=runs, n_samples=2048 if args.quick else 4096, render_s=5.0 if args.quick else 10.0)
    load_before = os.getloadavg()
    if args.batch:
        this, ref = (batch_compare(args.against, args.rounds, **batch_kw) if args.against
                     else (batch_costs(**batch_kw), None))
        print("\n".join(batch_lines(this, ref, args.against or "")))
        print(f"load average {load_before[0]:.1f} before, {os.getloadavg()[0]:.1f} after")
        return 0
    if args.voice:
        vs = voice_speed(3 if args.quick else 11, 1.0 if args.quick else None)
        for key, label in (("full", "Vocoder.generate"), ("net", "network alone"), ("stage", "waveform stage"),
                           ("full_int8", "Vocoder.generate, int8"), ("stage_int8", "waveform stage, int8")):
            lo, hi = (SR / r for r in vs[f"{key}_range"][::-1])  # the fastest run's RTF first
            print(f"shipped voice, {label}: {vs[key]:,.0f} samples/s RTF {SR / vs[key]:.3f} ({lo:.3f}-{hi:.3f})")
        print(f"load average {load_before[0]:.1f} before, {os.getloadavg()[0]:.1f} after")
        return 0
    K.warmup()
    blocks = block_table(runs)
    print(f"FMA throughput, one core (sgemm 384, one thread): {blocks['fma']:.0f} GFLOP/s; float16 weights "
          f"widened and multiplied-added from L1: {blocks['widen']:.0f} GFLOP/s", flush=True)
    print("\n".join(block_lines(blocks)), flush=True)
    if args.blocks:
        print(f"load average {load_before[0]:.1f} before, {os.getloadavg()[0]:.1f} after")
        return 0

    rows = []
    gi_full = None
    # H 384 and 512 at each density; the smaller sizes the default voice can shrink to at its 5 %
    shapes = [(384, d) for d in (1.0, 0.1, 0.05)] + [(352, 0.05), (320, 0.05), (288, 0.05)] + \
        [(H, d) for H in (512, 768) for d in (1.0, 0.1, 0.05)]
    for H, density in shapes:
        dense, sparse = random_vocoder(H, density)
        voc = Vocoder(dense, sparse, cond_blocks=COND_BLOCKS)
        gi_full = voc.frame_inputs(random_mel(400, seed=1))
        sps = engine_speed(voc, gi_full, runs, 0.15 if args.quick else 0.4)
        n_torch = 150 if args.quick else (400 if H < 768 else 200)
        tps = torch_speed(dense, sparse, gi_full, n_torch, 2 if args.quick else 3)
        flops = voc.flops_per_sample
        rows.append((H, density, sps, SR / sps, flops * sps / 1e9, tps, sps / tps, n_torch,
                     voc.block_shapes["gru.weight_hh"]))
        print(f"H={H} density={density}: {sps:,.0f} samples/s RTF {SR / sps:.3f} "
              f"{flops * sps / 1e9:.1f} GFLOP/s | torch {tps:,.0f} samples/s (x{sps / tps:.0f})", flush=True)
    # the AVX2-only CPU's revision, where this clone has it (a shallow clone may not)
    avx2_ref = AVX2_CPU_RUN[0] if resolve_commit(AVX2_CPU_RUN[0]) else None
    avx2 = avx2_rows(3 if args.quick else 5, 0.15 if args.quick else 0.4, avx2_ref)
    for (t, side), v in avx2.items():
        print(f"H=512 density=0.1, {t or 'native'} code, {side}: RTF median {statistics.median(v):.3f}", flush=True)
    vs = voice_speed(3 if args.quick else 11, 1.0 if args.quick else None)
    print(f"shipped voice: {vs['full']:,.0f} samples/s RTF {SR / vs['full']:.3f} | network alone "
          f"{vs['net']:,.0f} samples/s RTF {SR / vs['net']:.3f} | waveform stage {SR / vs['stage']:.3f}", flush=True)
    batch = batched_table(512, 0.1, 5.0 if args.quick else 20.0, 2 if args.quick else 3)
    for label, x_cpu, x_wall in batch:
        print(f"H=512 10 %: {label}: x{x_cpu:.1f} real time per CPU-second, x{x_wall:.1f} by wall clock", flush=True)
    this, ref = (batch_compare(args.against, args.rounds, **batch_kw) if args.against
                 else (batch_costs(**batch_kw), None))
    print("\n".join(batch_lines(this, ref, args.against or "")), flush=True)
    pieces = pieces_table(runs)
    print("\n".join(pieces_lines(pieces)), flush=True)
    (cold_w, cold_c), (warm_w, warm_c) = start_times()
    print(f"start: cold {cold_w:.1f} s wall / {cold_c:.1f} s CPU, warm {warm_w:.2f} s / {warm_c:.2f} s", flush=True)

    cmd = ".venv/bin/python bench/engine.py" + (" --quick" if args.quick else "") + \
        (f" --against {args.against}" if args.against else "")
    cpu = f"{machine.cpu_name()}, commit {machine.commit()}"
    lines = [
        "## Engine: numba WaveRNN kernels",
        "",
        f"Command: `{cmd}` ({time.strftime('%Y-%m-%d')}, {cpu}, 2 cores, numba {numba.__version__}, "
        f"SLP vectoriser: {K.SLP_ACTIVE}, 512-bit vectors: {K.WIDE_VECTORS}; load average {load_before[0]:.1f} "
        f"to {os.getloadavg()[0]:.1f}). CPU time of the generating thread (the machine is shared), medians of "
        f"{runs} runs.",
    ]
    goal = next(r for r in rows if r[0] == 512 and r[1] == 0.1)
    lines += [
        "",
        f"Goals (H 512, 10 % density): RTF <= 0.12 -> measured {goal[3]:.3f}; effective GFLOP/s >= 30 -> "
        f"{goal[4]:.1f}.",
        "",
        *(x for line in avx2_lines(avx2, avx2_ref) for x in (line, "")),
        f"The shipped voice's vocoder (H {vs['hidden']}, {vs['weights']:,.0f} stored weights per sample; LPC "
        f"order {vs['lpc']}, {vs['taps']} residual taps one period back), one stream on the acoustic model's mel "
        f"of a {vs['frames']}-frame sentence (`VOICE_TEXT`, {vs['seconds']:.1f} s), median of {vs['runs']} "
        "alternating runs and the fastest-slowest range:",
        "",
        "| what runs | samples/s | RTF @ 22.05 kHz | RTF range |",
        "|---|---:|---:|---:|",
        f"| `Vocoder.generate` (network, period inputs, LPC synthesis) | {vs['full']:,.0f} | "
        f"**{SR / vs['full']:.3f}** | {SR / vs['full_range'][1]:.3f}-{SR / vs['full_range'][0]:.3f} |",
        f"| its network alone (`kernels._generate`, no period inputs, no synthesis) | {vs['net']:,.0f} | "
        f"{SR / vs['net']:.3f} | {SR / vs['net_range'][1]:.3f}-{SR / vs['net_range'][0]:.3f} |",
        f"| the whole waveform stage: that, its post-filter and {vs['passes']} mel-matching passes "
        f"(`Voice.apply_postfilter`) | {vs['stage']:,.0f} | **{SR / vs['stage']:.3f}** | "
        f"{SR / vs['stage_range'][1]:.3f}-{SR / vs['stage_range'][0]:.3f} |",
        f"| `Vocoder.generate` with the int8 products on its state (`Voice.load(int8=True)`) | "
        f"{vs['full_int8']:,.0f} | **{SR / vs['full_int8']:.3f}** | "
        f"{SR / vs['full_int8_range'][1]:.3f}-{SR / vs['full_int8_range'][0]:.3f} |",
        f"| the whole waveform stage, int8 products | {vs['stage_int8']:,.0f} | **{SR / vs['stage_int8']:.3f}** | "
        f"{SR / vs['stage_int8_range'][1]:.3f}-{SR / vs['stage_int8_range'][0]:.3f} |",
        "",
    ]
    lines += [
        "### Random vocoders, block shapes, batches, start",
        "",
        "One stream, one thread. Effective GFLOP/s counts 2 FLOPs per stored weight of W_hh and "
        "O1..O4 (non-zero blocks only). Random weights pruned in 16x4 blocks (the VocoderConfig "
        f"default), stored by the engine as {rows[0][-1][0]}x{rows[0][-1][1]} blocks "
        "(`choose_block_kind`, by `kernels.MEASURED_GFLOPS`: 16x4 where that layout measured faster, else 8x4; the same products). "
        "Torch: a straightforward per-sample loop, dense "
        "weights, `torch.set_num_threads(1)`, same frame inputs, same inverse-CDF sampling; "
        "`torch n` is how many samples it ran.",
        "",
        "| H | density | engine samples/s | RTF @ 22.05 kHz | eff. GFLOP/s | torch samples/s | engine/torch | torch n |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for H, d, sps, rtf, gf, tps, ratio, nt, _ in rows:
        lines.append(f"| {H} | {d:g} | {sps:,.0f} | {rtf:.3f} | {gf:.1f} | {tps:,.0f} | {ratio:,.0f}x | {nt} |")
    lines += [
        "",
        "Block-sparse matvec alone (`kernels._spmv`), 3H x H with H = 512, 10 % of blocks kept at random, per "
        "engine block shape, float32 weights and float16 ones (a voice file's; widened as loaded). The float32 "
        "rows feed `kernels.MEASURED_GFLOPS`, which picks the layout at load. The bound is one core's roofline "
        f"(`bench/roofline.py`): its FMA throughput, {blocks['fma']:.0f} GFLOP/s (numpy's sgemm, one thread); "
        "its read bandwidth at the matvec's working set times the matvec's FLOPs per byte; and for float16 "
        f"weights the rate it widens them at, {blocks['widen']:.0f} GFLOP/s (a loop that only widens float16 "
        "weights kept in L1 and multiplies-adds them, run between the matvec's runs; median over the rows); "
        "whichever is lowest:",
        "",
    ]
    lines += block_lines(blocks)
    lines += [
        "",
        f"Offline rendering of {20 if not args.quick else 5} s of random mel, H = 512, 10 % density "
        "(`Vocoder.render`; fold = 40 frames + 4 overlap frames, all segments one batch in lanes, "
        "threads split the batch). Per CPU-second: audio seconds made per second of "
        "CPU summed over the threads, i.e. what one free core gives. Two threads share no data but the "
        "weights (read-only) and L3, so two free cores should give close to twice that. Wall clock: as "
        "measured on the shared machine (it depends on what else ran).",
        "",
        "| mode | x real time per CPU-second | x real time, wall clock |",
        "|---|---:|---:|",
    ]
    lines += [f"| {label} | {x_cpu:.1f} | {x_wall:.1f} |" for label, x_cpu, x_wall in batch]
    lines += [
        "",
        "#### Batches in lanes",
        "",
        "`Vocoder.generate_batch`: B streams, each on its own frames, 10 % density, "
        f"{batch_kw['n_samples']} samples; CPU time of the generating thread per sample per stream, median of "
        f"{runs} runs. From 24 streams, the largest multiple of 8 run in lanes (`kernels._generate_lanes`: "
        "state (H, L) stream-minor, each weight broadcast into 32 / 24 / 16 / 8 streams, gates and softmax "
        "exps vectorised over rows x streams); fewer streams, and the 1-7 left over, run stream-major "
        "(`kernels._generate_streams`: four streams per weight load, one-stream gates and draws; "
        "`vocoder.lane_split`). Every stream's samples equal `generate` on it, bit for bit (tested). "
        f"`Vocoder.render`: random mel, fold 40 + 4 frames, all segments one batch, one thread, CPU time"
        + (f"; 'before' is git revision `{args.against}`, measured in fresh processes taking turns with "
           f"this checkout ({args.rounds} each, medians)" if args.against else "")
        + f". Load average {load_before[0]:.1f} when the bench started, {os.getloadavg()[0]:.1f} at the end.",
        "",
    ]
    lines += batch_lines(this, ref, args.against or "")
    lines += [
        "",
        "#### Where a sample's time goes",
        "",
        "Each piece of the per-sample loop in a loop of its own with the vocoder's weights (`bench/sample_pieces.py`): "
        "W_hh h with its bias, the GRU update, the output layers with their biases and ReLUs, and the two "
        "draws on logits the vocoder produced; then the whole loop as it runs (`Vocoder.generate`, "
        "`Vocoder.generate_batch`). The rest is what the pieces leave of the whole; it may also hold how "
        "the pieces' data push each other out of the caches, so it moves from run to run (below 0 where the "
        "pieces alone took longer than in the loop). Microseconds per sample (per stream for the "
        f"batch), CPU time, medians of {runs} alternating runs:",
        "",
    ]
    lines += pieces_lines(pieces)
    lines += [
        "",
        f"Start: importing the kernels and `warmup()` take {cold_c:.1f} s of CPU ({cold_w:.1f} s wall) "
        f"with an empty numba cache (compiling everything) and {warm_c:.2f} s of CPU ({warm_w:.2f} s "
        "wall) once `cache=True` has filled it (every later start).",
        "",
    ]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines))
    print(f"wrote {args.out} ({shlex.quote(cmd)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
