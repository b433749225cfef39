"""The panels of the run view; each renders an immutable view held in a reactive attribute."""
