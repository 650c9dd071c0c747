#!/bin/bash
#SBATCH --job-name=emews
#SBATCH --partition=debug
#SBATCH --nodes=1
#SBATCH --ntasks=4
#SBATCH --time=00:05:00
#SBATCH --output=/scratch/emews/experiments/exp-0001/job-%j.out
#SBATCH --overcommit
# emews site slurm-loopback: 3 workers + 1 optimizer = 4 ranks on 1 node
cd /scratch/emews/experiments/exp-0001
# Slurm --signal=B:USR1@SECONDS (the batch shell's early warning): emews pauses its trials and stops now
trap 'kill -USR1 "$emews_launcher" 2>/dev/null' USR1
{python_bin}/mpiexec -n 4 --ppn 4 /opt/venv/bin/python -m emews run /scratch/emews/experiments/exp-0001 &
emews_launcher=$!
while wait "$emews_launcher"; emews_status=$?; kill -0 "$emews_launcher" 2>/dev/null; do :; done
exit "$emews_status"
