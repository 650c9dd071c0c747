"""The in-job runtime: distributor, workers, objectives, results store."""
