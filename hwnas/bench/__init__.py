"""Benchmark harnesses (``nas bench strategies``, ``nas bench predictors``): strategies and predictors compared
on published NAS benchmark tables, several seeds, figures and plots written.

This room sits on top of the library: it drives the same batch loop and components a run uses, and nothing
below imports it.
"""
