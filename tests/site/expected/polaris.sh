#!/bin/bash
#PBS -N emews
#PBS -A ABC123
#PBS -q debug
#PBS -l select=2
#PBS -l walltime=01:00:00
#PBS -o /scratch/emews/experiments/exp-0001/job.out
#PBS -j oe
#PBS -l place=scatter
#PBS -l filesystems=home:eagle
#PBS -k doe
# emews site polaris: 7 workers + 1 optimizer = 8 ranks on 2 nodes
cd /scratch/emews/experiments/exp-0001
# Slurm --signal=B:USR1@SECONDS (the batch shell's early warning): emews pauses its trials and stops now
trap 'kill -USR1 "$emews_launcher" 2>/dev/null' USR1
mpiexec -n 8 --ppn 4 --depth=8 --cpu-bind depth /opt/venv/bin/python -m emews run /scratch/emews/experiments/exp-0001 &
emews_launcher=$!
while wait "$emews_launcher"; emews_status=$?; kill -0 "$emews_launcher" 2>/dev/null; do :; done
exit "$emews_status"
