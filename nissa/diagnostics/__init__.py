"""Diagnosing a run that is stuck: every thread's stack on demand (answered by the hub's own thread, so a
training thread blocked in a collective, a data loader or a sleep does not stop it) and a ``faulthandler``
watchdog that writes them to the run directory when no Python thread can run at all."""

from nissa.diagnostics.install import answer_stacks, start_watchdog
from nissa.diagnostics.stacks import StacksResponder, format_stacks, install_stacks
from nissa.diagnostics.watchdog import StackWatchdog

__all__ = ["StackWatchdog", "StacksResponder", "answer_stacks", "format_stacks", "install_stacks", "start_watchdog"]
