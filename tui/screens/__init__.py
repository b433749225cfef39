"""Screens of esper-watch: the run picker, the live run view, replay, forms and help."""
