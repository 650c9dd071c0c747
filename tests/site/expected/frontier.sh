#!/bin/bash
#SBATCH --job-name=emews
#SBATCH --account=ABC123
#SBATCH --partition=batch
#SBATCH --nodes=2
#SBATCH --ntasks=16
#SBATCH --time=01:00:00
#SBATCH --gpus-per-node=8
#SBATCH --output=/scratch/emews/experiments/exp-0001/job-%j.out
# emews site frontier: 15 workers + 1 optimizer = 16 ranks on 2 nodes
cd /scratch/emews/experiments/exp-0001
# Slurm --signal=B:USR1@SECONDS (the batch shell's early warning): emews pauses its trials and stops now
trap 'kill -USR1 "$emews_launcher" 2>/dev/null' USR1
srun -N 2 -n 16 --ntasks-per-node=8 --gpus-per-node=8 --cpus-per-task=7 /opt/venv/bin/python -m emews run /scratch/emews/experiments/exp-0001 &
emews_launcher=$!
while wait "$emews_launcher"; emews_status=$?; kill -0 "$emews_launcher" 2>/dev/null; do :; done
exit "$emews_status"
