"""Where a benchmark ran, for the sentence each report opens with: the CPU's model name, the
number of CPUs, the commit measured (``+changes`` when the tree differs from it), the date.

The project's development machine changes between sessions (an AMD EPYC, an Intel Xeon), so a
number without its CPU cannot be compared with a rerun."""

from __future__ import annotations

import os
import platform
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def cpu_name() -> str:
    """The CPU's model name from /proc/cpuinfo with its family/model numbers and widest vector
    instructions ("AMD EPYC (family 25 model 1, AVX2)"), else platform's. A virtual machine's
    model name may be as vague as "AMD EPYC": on 2026-12-01 two EPYCs with and without AVX-512
    (Zen 5 and Zen 3) gave the vocoder 0.10 and 0.17 of real time under the same name."""
    fields: dict[str, str] = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            key = key.strip()
            if key in ("model name", "cpu family", "model", "flags") and key not in fields:
                fields[key] = value.strip()
            if key == "flags":
                break
    except OSError:
        pass
    if "model name" not in fields:
        return platform.processor() or "unknown CPU"
    flags = set(fields.get("flags", "").split())
    isa = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "no AVX2"
    ident = f"family {fields['cpu family']} model {fields['model']}, " if "cpu family" in fields else ""
    return f"{fields['model name']} ({ident}{isa})"


def commit() -> str:
    """The checked-out commit's short hash, ``+changes`` when the working tree differs from it
    outside docs/ (where the benchmarks themselves write, one after another in `make bench`)."""
    try:
        rev = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no", "--",
                                ".", ":(exclude)docs"],
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown commit"
    return rev + ("+changes" if dirty else "")


def describe() -> str:
    """"2026-12-01, Intel(R) Xeon(R) Processor, 2 CPUs, commit 1a2b3c4, load average 0.9"."""
    load = os.getloadavg()[0]
    return (f"{time.strftime('%Y-%m-%d', time.gmtime())}, {cpu_name()}, {os.cpu_count()} CPUs, commit {commit()}, "
            f"load average {load:.1f}")
