"""What a component's ``/metrics`` says, read with prometheus_client's own parser: one reading
for every end-to-end test instead of a regular expression per test."""

from __future__ import annotations

import ssl

import httpx
from prometheus_client.parser import text_string_to_metric_families


def exported_in(text: str, name: str, **labels: str) -> float:
    """The sum of the samples named ``name`` (``..._total`` for a counter) in an exposition
    ``text`` that carry ``labels``; 0 when there are none."""
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name and labels.items() <= sample.labels.items()
    )


def exported(url: str, name: str, *, verify: ssl.SSLContext | bool = True, **labels: str) -> float:
    """:func:`exported_in` of ``url``'s ``/metrics``."""
    response = httpx.get(f"{url}/metrics", timeout=10, verify=verify)
    response.raise_for_status()
    return exported_in(response.text, name, **labels)
