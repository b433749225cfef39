"""nissa_server: stores every event, fans them out to watchers, routes commands back."""

__version__ = "0.1.0"
