"""Built-in optimizers, installed as ``emews.optimizers`` and named by short name in workflows."""
