"""Configuration: workflow files, YAML, validation messages, plug-in resolution, experiment directories and their lease."""
