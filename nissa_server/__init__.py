"""nissa_server: stores every event, fans them out to watchers, routes commands back."""
