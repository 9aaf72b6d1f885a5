"""Which node a Prometheus series belongs to, by its ``instance`` label.

Exact matching, in this order: the node's InternalIP, ``InternalIP:port``, then the node's
hostname or name (also with a port). crane builds an unescaped regex from the IP instead, so
``10.0.0.1`` also matches ``10.0.0.10``; loadsched never does.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class NodeAddresses:
    name: str
    internal_ips: tuple[str, ...] = ()
    hostnames: tuple[str, ...] = ()


def _split_port(instance: str) -> str | None:
    """``10.0.0.1:9100`` → ``10.0.0.1``; ``[fd00::1]:9100`` → ``fd00::1``; else ``None``."""
    if instance.startswith("["):
        host, sep, port = instance[1:].partition("]:")
        return host if sep and port.isdigit() else None
    host, sep, port = instance.rpartition(":")
    if sep and port.isdigit() and ":" not in host:
        return host
    return None


class InstanceIndex:
    """Maps ``instance`` label values to node names."""

    def __init__(self, nodes: Iterable[NodeAddresses]) -> None:
        self._by_ip: dict[str, str] = {}
        self._by_name: dict[str, str] = {}
        for node in nodes:
            for ip in node.internal_ips:
                self._by_ip.setdefault(ip, node.name)
            for name in (*node.hostnames, node.name):
                self._by_name.setdefault(name, node.name)

    def node_for(self, instance: str) -> str | None:
        if instance in self._by_ip:
            return self._by_ip[instance]
        host = _split_port(instance)
        if host is not None and host in self._by_ip:
            return self._by_ip[host]
        if instance in self._by_name:
            return self._by_name[instance]
        if host is not None and host in self._by_name:
            return self._by_name[host]
        return None


def usage_fraction(value: float, scale: float) -> float:
    """A query result as a usage fraction: divided by ``scale``; NaN or negative → 0."""
    if math.isnan(value) or value < 0:
        return 0.0
    return value / scale


@dataclass(frozen=True, slots=True)
class Matched:
    values: Mapping[str, float]
    """Node name → usage fraction. Several series for one node: the highest wins."""
    unmatched: tuple[str, ...]
    """``instance`` values that match no node."""


def match_series(
    series: Iterable[tuple[str, float]], index: InstanceIndex, *, scale: float
) -> Matched:
    values: dict[str, float] = {}
    unmatched: list[str] = []
    for instance, raw in series:
        node = index.node_for(instance)
        if node is None:
            unmatched.append(instance)
            continue
        value = usage_fraction(raw, scale)
        if node not in values or value > values[node]:
            values[node] = value
    return Matched(values, tuple(unmatched))
