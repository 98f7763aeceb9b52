"""What a lab's Prometheus and Grafana take from rtscope, shipped as package data (serve/lab/): the alerting
rules over /metrics' series and a Grafana dashboard of the same series (docs/lab.md).

    rtscope serve --print-alert-rules        > /etc/prometheus/rtscope-alerts.yml
    rtscope serve --print-grafana-dashboard  > rtscope-lab.json   (Grafana: Dashboards > Import)
"""

from __future__ import annotations

from importlib.resources import files

ALERT_RULES = "rtscope-alerts.yml"
GRAFANA_DASHBOARD = "rtscope-grafana-dashboard.json"


def text(name: str) -> str:
    """A shipped file's text, as installed with the package (or in the checkout)."""
    return (files(__package__) / "lab" / name).read_text(encoding="utf-8")
