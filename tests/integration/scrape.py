"""Scrape a daemon's Prometheus endpoint over real HTTP and look samples up by name and labels."""

from __future__ import annotations

import asyncio
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from tests.integration.daemons import Daemon


class Samples:
    def __init__(self, text: str) -> None:
        self.rows = [(s.name, s.labels, s.value) for fam in text_string_to_metric_families(text) for s in fam.samples]

    def get(self, metric: str, /, **labels: str) -> list[float]:
        return [v for n, lbl, v in self.rows if n == metric and all(lbl.get(k) == x for k, x in labels.items())]

    def one(self, metric: str, /, **labels: str) -> float:
        found = self.get(metric, **labels)
        assert len(found) == 1, f"{metric}{labels}: {found}"
        return found[0]


def scrape(addr: str) -> Samples:
    with urllib.request.urlopen(f"http://{addr}/metrics", timeout=10) as response:
        assert response.status == 200
        return Samples(response.read().decode())


async def scrape_async(addr: str) -> Samples:
    return await asyncio.to_thread(scrape, addr)


def metrics_addr(daemon: Daemon) -> str:
    """The exporter's address from the daemon's stdout (printed before its boot line)."""
    for line in daemon.lines:
        if "The metrics exporter listening on " in line:
            return line.rsplit(" ", 1)[1].strip()
    raise AssertionError(f"{daemon.name} printed no metrics exporter line: {daemon.lines[-5:]}")
