"""NissaHub: non-blocking event emission, a local run log as source of truth, websocket delivery."""

from nissa.hub.config import BackoffConfig, HubConfig, ingest_url, log_file_name
from nissa.hub.hub import NissaHub
from nissa.hub.stats import DeliveryReport, HubStats

__all__ = ["BackoffConfig", "DeliveryReport", "HubConfig", "HubStats", "NissaHub", "ingest_url", "log_file_name"]
