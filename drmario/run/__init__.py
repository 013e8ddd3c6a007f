"""Running: the command line, the notebook pipeline and profiles, and the notebooks' helpers."""
