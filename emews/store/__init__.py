"""The experiment's durable store: results, tasks and the training tables (reports, checkpoints, lineage), every SQL statement in one place."""
