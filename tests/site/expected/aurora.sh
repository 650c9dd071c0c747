#!/bin/bash
#PBS -N emews
#PBS -A ABC123
#PBS -q debug
#PBS -l select=2
#PBS -l walltime=01:00:00
#PBS -o /scratch/emews/experiments/exp-0001/job.out
#PBS -j oe
#PBS -l place=scatter
#PBS -l filesystems=home:flare
#PBS -k doe
# emews site aurora: 23 workers + 1 optimizer = 24 ranks on 2 nodes
export ZE_ENABLE_PCI_ID_DEVICE_ORDER=1
cd /scratch/emews/experiments/exp-0001
# Slurm --signal=B:USR1@SECONDS (the batch shell's early warning): emews pauses its trials and stops now
trap 'kill -USR1 "$emews_launcher" 2>/dev/null' USR1
mpiexec -n 24 --ppn 12 --cpu-bind=list:1-8:9-16:17-24:25-32:33-40:41-48:53-60:61-68:69-76:77-84:85-92:93-100 /opt/venv/bin/python -m emews run /scratch/emews/experiments/exp-0001 &
emews_launcher=$!
while wait "$emews_launcher"; emews_status=$?; kill -0 "$emews_launcher" 2>/dev/null; do :; done
exit "$emews_status"
