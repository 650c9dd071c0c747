#!/bin/bash
# emews site local: 4 workers + 1 optimizer = 5 ranks on 1 node
cd /scratch/emews/experiments/exp-0001
{python_bin}/mpiexec -n 5 /opt/venv/bin/python -m emews run /scratch/emews/experiments/exp-0001
