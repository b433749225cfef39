"""trainer: ``esper-train``, the Esper loop (Kasmina's host and slots, Tamiyo's policy, Simic's training) and its
telemetry collectors; it reaches Nissa through ``nissa``'s public API, as any loop does (``build``)."""
