# The options of the default voice's vocoder runs (resume.sh and the recipes in README.md source this).
# Density 0.05 in 16x4 blocks from session 18 (run sparse05; the schedule moved to its start, resume.sh);
# the runs before it trained at 0.1 (--density 0.1 --prune-start 2000 --prune-ramp 8000).
# 320 hidden units from session 20 (run h320: sparse05's 384 shrunk by python -m wavern.training.shrink).
# lr 3e-5 from step 91516 (session 23; 1e-4 before): 0.004-0.010 nats lower held-out loss within 1800 steps.
VOC="--corpus data/corpus --cache runs/vocoder/cache \
  --hidden 320 --cond-channels 128 --cond-blocks 3 --block 16x4 --density 0.05 --prune-start 64851 --prune-ramp 4800 \
  --prune-every 200 --lpc-order 16 --no-lpc-input --head-pruning rows --pitch --ltp --ltp-input --ltp-input-taps 5 --steps 200000 --batch 16 \
  --segment-frames 4 --lr 3e-5 --warmup 100 --lr-half-life 40000 --lr-min 3e-5 --optimizer adam --grad-clip 1.0 \
  --threads 1 --bf16 on --seed 0 --checkpoint-interval 300 --eval-every 500 --eval-batches 4 --log-every 10 \
  --period-input-fade 0.8"
