"""Training trials: the messages between a training objective and the optimizer rank, the objective's session, checkpoint files, retention and the trial schedulers. No MPI here."""
