"""nissa: the client library that puts any PyTorch training loop on a Nissa server.

The hub (``nissa.hub``) never blocks the loop and logs every event locally first; the command
runtime (``nissa.control``, ``nissa.runtime``) applies commands at step boundaries, at one agreed
step on every rank (``nissa.ranks``); ``nissa.telemetry`` holds the debug and profile windows.
"""
