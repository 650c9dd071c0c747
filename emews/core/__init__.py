"""Core: the contracts every layer uses (errors, points and spaces, results, the queue pair, the evaluator, the optimizer contract, replicates, task sizes)."""
