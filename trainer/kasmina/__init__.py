"""Kasmina: the host network and its seed slots. A seed module is germinated into a slot, trained on the host's
errors in isolation, blended in with a rising alpha, then fossilized (kept) or pruned (``lifecycle``); the host's
layers (``host``, ``model``), the seeds' blueprints (``blueprints``), a slot (``slot``) and many slots stepped as
one (``stacked``), the blending schedule (``alpha``)."""
