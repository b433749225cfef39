"""tui: esper-watch, the operator console."""
