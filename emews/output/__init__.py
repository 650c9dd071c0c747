"""Results out of a store: ``results.csv`` (and its background writers), results per point, the DeepHyper export, the best checkpoints."""
