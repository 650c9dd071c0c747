"""Trial schedulers: early stopping and population-based training, decided from reports.

A scheduler is a plain object with pure decision logic (no I/O, no clock): the optimizer rank
calls ``on_report`` for every stored report and sends the :class:`~emews.training.messages.Decision`
back to the trial. Its state is rebuilt on ``emews resume`` by replaying the stored reports.
Composable with any optimizer: ``trial_scheduler: {name: asha, options: {...}}`` in a workflow.
(Not to be confused with the batch schedulers of ``emews.site``: Slurm, PBS, LSF.)
"""

from emews.training.schedulers.trial_scheduler import TrialScheduler, quantile

__all__ = ["TrialScheduler", "quantile"]
