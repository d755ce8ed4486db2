"""The options of `wavern bench`, in a module light enough for the CLI to import at start-up
(:mod:`wavern.app.bench` itself pulls in numpy)."""

from __future__ import annotations

from wavern.app.argtypes import float_in

__all__ = ["add_bench_arguments"]


def add_bench_arguments(p) -> None:
    """The options of `wavern bench` on an argparse parser."""
    p.add_argument("--json", metavar="PATH", help="write results as JSON")
    p.add_argument("--compare", choices=["torch"], help="also run the torch reference loop with the same weights")
    p.add_argument("--voice", metavar="NAME|PATH")
    p.add_argument("--load", type=int, default=0, metavar="N", help="saturate N other cores while measuring")
    p.add_argument("--device", action="store_true", help="measure against the real audio device, not the null sink")
    p.add_argument("--plot", metavar="PATH", help="write a PNG: latency per sentence and buffer headroom over time")
    p.add_argument("--sentences", metavar="PATH", help="one sentence per line (default: the shipped bench set)")
    p.add_argument("--repeat", type=int, default=1, metavar="N", help="speak the sentence set N times")
    p.add_argument("--compare-frames", type=int, default=20, metavar="N",
                   help="mel frames (x256 samples) the torch loop generates for --compare (it is slow)")
    p.add_argument("--realtime", type=float, default=None, metavar="SECONDS",
                   help="speak the sentences as one text, again and again, until SECONDS of audio are made, into a "
                        "sink that consumes at the sample rate like a sound card; counts its underruns")
    p.add_argument("--buffer", type=float_in(0.0, 3600.0, above=True), default=4.0, metavar="SECONDS",
                   help="ring capacity of the --realtime sink (how far generation may run ahead; rounded up to a "
                        "power of two samples: 4 s holds 5.94 s at 22050 Hz)")
