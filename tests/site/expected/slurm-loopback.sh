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
{python_bin}/mpiexec -n 4 --ppn 4 /opt/venv/bin/python -m emews run /scratch/emews/experiments/exp-0001
