"""Alerts: rules over the runs a server stores, notifications that reach a person (see ``service``)."""
