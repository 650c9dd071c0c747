"""One run wired together: the in-job entry point every rank runs, rank 0's part, the threads-only job used by tests and ``check --try``."""
