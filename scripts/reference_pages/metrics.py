"""``metrics.md``: every Prometheus metric, collected from the registries the services serve
at ``/metrics`` (the extender's as its app builds it, the annotator's)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from fastapi import FastAPI
from prometheus_client import CollectorRegistry

from annotator.metrics import AnnotatorMetrics
from extender.state import ExtenderState
from reference_pages.markdown import cell, code, page, table


@dataclass(frozen=True)
class Metric:
    name: str
    kind: str
    labels: tuple[str, ...]
    help: str


def files(extender_app: FastAPI) -> dict[str, str]:
    state: ExtenderState = extender_app.state.loadsched
    sources = [
        ("loadsched-extender", state.metrics.registry),
        ("loadsched-annotator", AnnotatorMetrics().registry),
    ]
    blocks = [
        "Every metric the services export at `/metrics`, collected from their registries. "
        "Counters are named with their `_total` suffix; a histogram's series are its "
        "`_bucket` (with `le`), `_sum` and `_count`. The scrape configuration and the "
        "dashboard are in [Operate](../operate.md); the dispatch poller and the kubectl "
        "plugin export none.",
    ]
    for service, registry in sources:
        found = sorted(collected(registry), key=lambda m: m.name)
        rows = [
            [
                code(shown_name(m)),
                m.kind,
                ", ".join(code(label) for label in m.labels),
                cell(m.help),
            ]
            for m in found
        ]
        blocks += [f"## {service}", table(["metric", "type", "labels", "help"], rows)]
    return {"metrics.md": page("Metrics", *blocks)}


def shown_name(metric: Metric) -> str:
    return metric.name + ("_total" if metric.kind == "counter" else "")


def collected(registry: CollectorRegistry) -> Iterator[Metric]:
    """Each family ``registry.collect()`` yields, with its label names. A labelled metric
    with no series yet yields no samples to read them from, so they come from the collector
    registered under the family's name (prometheus_client keeps them in ``_labelnames``)."""
    collectors = registry._names_to_collectors  # no public accessor for label names
    for family in registry.collect():
        collector = collectors.get(family.name) or collectors.get(f"{family.name}_total")
        labels = tuple(getattr(collector, "_labelnames", ()))
        yield Metric(family.name, family.type, labels, family.documentation)
