"""``--lease-seconds`` for the benches that start a sandbox of thousands of nodes: kwok renews every node's Lease each
quarter of it, so at thousands of nodes the renewals are a large part of the API server's
load, as in a cluster. kubelet's default (40 s) at 5,000 nodes is 500 renewals a second, more
than 2 cores serve beside the rest: lengthen it there and say so with the figures."""

from __future__ import annotations

import argparse

from sandbox.kwok import LEASE_SECONDS


def lease_seconds(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 10:
        raise argparse.ArgumentTypeError(f"must be 10 or more: {text!r}")
    return value


def add_lease_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--lease-seconds",
        type=lease_seconds,
        default=LEASE_SECONDS,
        help="the nodes' Lease duration; kwok renews every quarter of it "
        f"(default {LEASE_SECONDS}, kubelet's)",
    )


def renewals(nodes: int, lease: int) -> str:
    """What kwok's heartbeats cost the API server, for a bench's header."""
    return (
        f"kwok renews {nodes} node Leases every {lease / 4:g} s ({nodes / (lease / 4):.0f} "
        f"updates/s)"
    )
