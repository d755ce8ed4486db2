#!/bin/sh
# Continue the espeak voice's training runs on a fresh machine (or the same one).
# Run from the repository root after ./setup.sh:   sh assets/training/resume.sh
# Each run continues from its runs/<name>/checkpoint.pt when it exists (bit-exact), else from the
# shipped voice folder (its float16 weights and blocks, a fresh optimiser). The shipped voice: vocoder
# h320 step 95080, acoustic model step 23800 (docs/VOICE.md); how they got there and what was tried:
# docs/TRAINING.md.
set -e
cd "$(dirname "$0")/../.."
PY=.venv/bin/python

# The corpus is deterministic from its seed: this rebuilds the very corpus the runs trained on.
[ -f data/corpus/metadata.jsonl ] || .venv/bin/wavern corpus build data/corpus --utterances 2000 --seed 0

# Acoustic model, only with ACOUSTIC_MINUTES set (by default the cores go to the vocoder): continues
# from the shipped voice's acoustic model (--init-from a voice folder) with pitch and prosody, into
# runs/acoustic_voice; a rerun resumes it. With a free core: .venv/bin/torchrun --standalone
# --nproc-per-node 2 -m wavern.training.acoustic_trainer ... (2.1-2.9 steps/s).
if [ -n "${ACOUSTIC_MINUTES:-}" ]; then
mkdir -p runs/acoustic_voice
nohup $PY -m wavern.training.acoustic_trainer data/corpus runs/acoustic_voice \
  --init-from assets/voices/espeak --pitch --prosody --steps 100000 --batch-size 8 --lr 5e-4 \
  --warmup-steps 100 --time-limit-min ${ACOUSTIC_MINUTES:-60} --eval-every 500 --threads 1 \
  >> runs/acoustic_voice.log 2>&1 &
echo "acoustic training: PID $!, log runs/acoustic_voice.log"
fi

# Vocoder: the LPC WaveRNN with the long-term predictor and the period inputs, 320 units, 5 % of its
# blocks, lr 3e-5 (the options: voc_options.sh; why each: docs/TRAINING.md). 1 thread (2 threads
# collapse when the other core is busy), bf16 where the CPU has it.
. assets/training/voc_options.sh  # $VOC: the vocoder runs' options
RUN=h320
mkdir -p runs/$RUN
if [ -f runs/$RUN/checkpoint.pt ]; then START="--resume"; else START="--init-from assets/voices/espeak"; fi
nohup $PY -m wavern.training.vocoder_trainer $VOC --run-dir runs/$RUN $START >> runs/$RUN/log.txt 2>&1 &
echo $! > runs/$RUN/pid
echo "vocoder training ($RUN): PID $!, log runs/$RUN/log.txt, metrics runs/$RUN/metrics.jsonl"
# With a free core it ran data-parallel (1.45x: 0.87 against 0.60 steps/s on a Zen 3):
#   .venv/bin/torchrun --standalone --nproc-per-node 2 -m wavern.training.vocoder_trainer $VOC --run-dir runs/$RUN --resume

# Later, assemble a voice from wherever the runs are and measure it (copy synthesis gives a pitch
# voice the true audio's pitch features); ship it only where it beats the shipped voice:
#   $PY -c "from wavern.training.voice import assemble_from_runs; assemble_from_runs('assets/voices/espeak', \
#     acoustic_checkpoint='runs/acoustic_voice/checkpoint.pt', vocoder_checkpoint='runs/h320/checkpoint.pt', \
#     corpus_dir='data/corpus', card=open('assets/voices/espeak/MODEL_CARD.md').read(), \
#     postfilter={'gamma_num': 0.92, 'gamma_den': 0.96, 'tilt': 0.2, 'order': 56, 'pitch_gain': 0.5}, \
#     melmatch={'cap': 4.0, 'floor': 0.001, 'iterations': 8, 'smooth': 1.5}, \
#     melmatch_measured={'cap': 4.0, 'floor': 0.001, 'iterations': 8})"
#   $PY bench/eval_voice.py --n-utts 10 --metrics runs/h320/metrics.jsonl
#   or keep the acoustic model and swap the vocoder only (what session 18 shipped):
#   $PY -c "import sys; sys.path.insert(0, 'bench'); from pathlib import Path; from compare_vocoders import swap_vocoder; \
#     swap_vocoder(Path('assets/voices/espeak'), 'runs/h320/checkpoint.pt', Path('/tmp/voice'))"
