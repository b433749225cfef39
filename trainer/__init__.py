"""trainer: esper-train, the Esper loop and the NissaHub that streams its events."""
