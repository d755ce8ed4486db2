#!/bin/sh
# Continue the default voice's training runs on a fresh machine (or the same one).
# Run from the repository root after ./setup.sh:   sh assets/training/resume.sh
# Each run continues from its runs/<name>/checkpoint.pt when it exists (bit-exact), else from
# the compact checkpoints committed here (not bit-exact, same weights and moments).
#
# Session 5 on, the runs are the pitch-aware ones (docs/bench/lpc_vocoder.md, "Session 5"): an
# LPC vocoder with a long-term (pitch) predictor, and the acoustic model with a pitch projection.
# Session 6 on, the vocoder also reads the residuals around one period back (--ltp-input
# --ltp-input-taps 5, run ltp_win); session 7 on, it trains with that input faded at random
# (--period-input-fade 0.8, run ltp_fade, branched from ltp_win at step 60905).
# Session 8 tried a glottal phase input (runs phase, phase2, phase3; docs/bench/lpc_vocoder.md
# "Session 8"). Session 9 on, the live experiment is a denser vocoder (--density 0.15, run dense15,
# branched from fade_hi at step 86543 with the pruned blocks of largest squared gradient revived)
# against fade_hi (density 0.1), both at lr 1e-4. Since session 9 the voice's mel matching
# (engine/melmatch.py) does more for what is heard than any of these runs has; session 10 added the
# post-filter's pitch stage and smoothed mel matching for the acoustic model's mel (same networks).
# The shipped voice (assets/voices/default): vocoder h320 step 95080 (ltp_fade's 67851 carried
# to 5 % density as sparse05, sessions 18-19, then shrunk from 384 to 320 hidden units at its step
# 76131 and trained on, sessions 20-23), acoustic model step 23800
# (acoustic_prosody's 7731, then runs/acoustic_voice's 16069, sessions 11-12; docs/VOICE.md).
set -e
cd "$(dirname "$0")/../.."
PY=.venv/bin/python

# The corpus is deterministic from its seed: this rebuilds the very corpus the runs trained on.
[ -f data/corpus/metadata.jsonl ] || .venv/bin/wavern corpus build data/corpus --utterances 2000 --seed 0

# Acoustic model (only with ACOUSTIC_MINUTES set, so by default the cores go to the vocoder): since
# session 11 it continues from the shipped voice's own acoustic model (--init-from a voice folder:
# its config and float16 weights, a fresh optimiser, the run's steps counted from 0), with pitch and
# prosody as shipped, into runs/acoustic_voice; a rerun resumes it. (Before: from
# acoustic-compact.pt, the session-4 model at step 5673, through runs/acoustic_pitch and
# runs/acoustic_prosody, whose step 7731 is the shipped one; its checkpoints are not in git.) Session
# 11 ran it 5901 steps on both cores (torchrun, 2 processes; not shipped then: phone accuracy 0.006
# lower on two draws); session 12 continued it to 16069 (held-out mel L1 0.397 against 0.422, end to
# end MCD vs espeak-ng 0.04-0.05 dB lower and phone accuracy 0.002-0.004 higher on both draws) and
# shipped that (assets/training/README.md "Session 12"). On a fresh machine this now continues from
# the shipped 16069 with a fresh optimiser. 1 thread; --time-limit-min bounds one call; session 12
# ran it as `.venv/bin/torchrun --standalone --nproc-per-node 2 -m wavern.training.acoustic_trainer ...`.
if [ -n "${ACOUSTIC_MINUTES:-}" ]; then
mkdir -p runs/acoustic_voice
nohup $PY -m wavern.training.acoustic_trainer data/corpus runs/acoustic_voice \
  --init-from assets/voices/default --pitch --prosody --steps 100000 --batch-size 8 --lr 5e-4 \
  --warmup-steps 100 --time-limit-min ${ACOUSTIC_MINUTES:-60} --eval-every 500 --threads 1 \
  >> runs/acoustic_voice.log 2>&1 &
echo "acoustic training: PID $!, log runs/acoustic_voice.log"
fi

# Vocoder: the LPC run (order 16, excitation only, output layers pruned row by row) with the
# long-term predictor from the pitch features (--pitch --ltp, linear code) and the residuals
# r_{t-T-2} .. r_{t-T+2} around one period back as GRU inputs (--ltp-input --ltp-input-taps 5),
# continued from the session-5 LTP run (ltp_lin) at step 36433 (one tap from there, five from
# 38565); vocoder-compact.pt is its latest committed step (a compact without these inputs gets them
# with zero weights). Base lr 1e-4 from step 45967 (3e-4 before; docs/bench/lpc_vocoder.md). Each
# segment's period input scaled by U(0.2, 1) in training (--period-input-fade 0.8, from step 60905:
# docs/bench/lpc_vocoder.md "Session 7"); the compact in git is ltp_win's step 57715, from before
# that (6 MB a time; from it this run redoes the fade fine-tune). 1 thread
# (2 threads collapse when the other core is busy), bf16 where the CPU has it, block pruning to 10 %
# done by step 10000 (to 5 % from session 18, below).
. assets/training/voc_options.sh  # $VOC: the vocoder runs' options
# Session 18 on, the live run is sparse05: the shipped 10 % vocoder (ltp_fade 67851) carried to 5 %
# block density (--density 0.05 with the pruning cubic moved so that it passes 0.9 at step 67851 and
# ends at 69651: --prune-start 64851 --prune-ramp 4800, both in $VOC), so that the voice runs at
# about RTF 0.12 on AVX2-only CPUs too (assets/training/README.md "Session 18"). Without its checkpoint
# here it starts from the shipped voice folder itself (its float16 weights and blocks, a fresh
# optimiser; no compact checkpoint in git for it). The older runs (dense15, fade_hi) are in git
# history (this file at commit c84c11f).
# Session 20 on, the live run is h320: sparse05's checkpoint at step 76131 shrunk to 320 hidden
# units (python -m wavern.training.shrink, which chose and removed 2 groups of 16 units per half;
# assets/training/README.md "Session 20"), fine-tuned with the same options at --hidden 320 ($VOC).
# Without its checkpoint here it starts from the shipped voice folder (320 units since then).
# Session 22 tried distilling it from the 10 % vocoder (--distill-from, the voice folder at commit
# 9d5265d): 0.002 nats ahead step for step at 1.57x the step time, so h320 continues without it
# (assets/training/README.md "Session 22").
# Session 23: lr 3e-5 from step 91516 (1e-4 before; voc_options.sh, assets/training/README.md "Session 23").
RUN=h320
mkdir -p runs/$RUN
if [ -f runs/$RUN/checkpoint.pt ]; then START="--resume"; else START="--init-from assets/voices/default"; fi
nohup $PY -m wavern.training.vocoder_trainer $VOC --run-dir runs/$RUN $START >> runs/$RUN/log.txt 2>&1 &
echo $! > runs/$RUN/pid
echo "vocoder training ($RUN): PID $!, log runs/$RUN/log.txt, metrics runs/$RUN/metrics.jsonl"
# With a free core it ran data-parallel (1.45x: 0.87 against 0.60 steps/s on a Zen 3):
#   .venv/bin/torchrun --standalone --nproc-per-node 2 -m wavern.training.vocoder_trainer $VOC --run-dir runs/$RUN --resume

# Later, assemble a voice from wherever the runs are and measure it (copy synthesis gives a pitch
# voice the true audio's pitch features); ship it only where it beats the shipped voice:
#   $PY -c "from wavern.training.voice import assemble_from_runs; assemble_from_runs('assets/voices/default', \
#     acoustic_checkpoint='runs/acoustic_voice/checkpoint.pt', vocoder_checkpoint='runs/h320/checkpoint.pt', \
#     corpus_dir='data/corpus', card=open('assets/voices/default/MODEL_CARD.md').read(), \
#     postfilter={'gamma_num': 0.92, 'gamma_den': 0.96, 'tilt': 0.2, 'order': 56, 'pitch_gain': 0.5}, \
#     melmatch={'cap': 4.0, 'floor': 0.001, 'iterations': 8, 'smooth': 1.5}, \
#     melmatch_measured={'cap': 4.0, 'floor': 0.001, 'iterations': 8})"
#   $PY bench/eval_voice.py --n-utts 10 --metrics runs/h320/metrics.jsonl
#   or keep the acoustic model and swap the vocoder only (what session 18 shipped):
#   $PY -c "import sys; sys.path.insert(0, 'bench'); from pathlib import Path; from compare_vocoders import swap_vocoder; \
#     swap_vocoder(Path('assets/voices/default'), 'runs/h320/checkpoint.pt', Path('/tmp/voice'))"
