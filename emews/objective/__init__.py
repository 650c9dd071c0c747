"""Objectives: loading a function objective, the task context it sees, command-line objectives (CANDLE conventions included) and a team member's view of a multi-rank task."""
