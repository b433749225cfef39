"""Nissa inside the training frameworks people already use (``nissa.integrations.lightning``)."""
