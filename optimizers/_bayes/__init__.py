"""Private pieces of the ``bayes`` optimizer; the public class lives in :mod:`emews.optimizers.bayes`."""
