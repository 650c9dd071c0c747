#!/bin/bash
#BSUB -P ABC123
#BSUB -J emews
#BSUB -q batch
#BSUB -W 01:00
#BSUB -nnodes 2
#BSUB -o /scratch/emews/experiments/exp-0001/job-%J.out
# emews site summit: 11 workers + 1 optimizer = 12 ranks on 2 nodes
export OMP_NUM_THREADS=1
cd /scratch/emews/experiments/exp-0001
# Slurm --signal=B:USR1@SECONDS (the batch shell's early warning): emews pauses its trials and stops now
trap 'kill -USR1 "$emews_launcher" 2>/dev/null' USR1
jsrun -n 12 -r 6 -a 1 -c 7 -g 1 /opt/venv/bin/python -m emews run /scratch/emews/experiments/exp-0001 &
emews_launcher=$!
while wait "$emews_launcher"; emews_status=$?; kill -0 "$emews_launcher" 2>/dev/null; do :; done
exit "$emews_status"
