"""Reports of an experiment, read from its store alone (``emews report``, ``emews status``).

``data`` reads the store into frames (detecting optional tables such as per-step reports);
``timeline`` computes runs, load over time and utilization; one module per plot
(``trajectory``, ``load``, ``gantt``, ``parameters``, ``failures``, ``curves``) returns a
``figures.Plot``; ``summary`` puts figures into words; ``html`` and ``render`` write the
report; ``status`` is the live headline. Plots use matplotlib's Agg renderer only.
"""
