"""Per-node load verdicts, cached until time or the node's annotations could change them.

:class:`NodeLoadCache` is fed by the node watch (names-only mode); :class:`RequestMemo` keeps
the decoded annotations of nodes sent in full-node requests, so an unchanged node is not
decoded again on the next call. Both hand out :class:`CachedLoad` entries.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

import msgspec

from extender.wire import NODE_DECODER, Node
from shared.load_model import LoadRules, NodeLoad, Verdict, evaluate


class CachedLoad:
    """One node's decoded load and its last verdict."""

    __slots__ = ("_computed_at", "_verdict", "fingerprint", "load")

    def __init__(self, load: NodeLoad, fingerprint: tuple[str | None, ...]) -> None:
        self.load = load
        self.fingerprint = fingerprint
        self._verdict: Verdict | None = None
        self._computed_at: datetime | None = None

    def verdict(self, rules: LoadRules, now: datetime) -> Verdict:
        """The verdict at ``now``; recomputed only when a fresh value used has expired since."""
        verdict = self._verdict
        computed_at = self._computed_at
        if (
            verdict is None
            or computed_at is None
            or now < computed_at
            or (verdict.valid_until is not None and now >= verdict.valid_until)
        ):
            verdict = self._verdict = evaluate(self.load, rules, now)
            self._computed_at = now
        return verdict


def fingerprint(annotations: Mapping[str, str] | None, rules: LoadRules) -> tuple[str | None, ...]:
    """The annotation values the rules read, in order: equal fingerprints, equal loads."""
    if not annotations:
        return (None,) * len(rules.keys)
    return tuple(annotations.get(key) for key in rules.keys)


def cached_load(
    name: str, annotations: Mapping[str, str] | None, rules: LoadRules, previous: CachedLoad | None
) -> CachedLoad:
    """``previous`` if the node's relevant annotations are unchanged, else a freshly decoded one."""
    key = fingerprint(annotations, rules)
    if previous is not None and previous.fingerprint == key:
        return previous
    return CachedLoad(NodeLoad.from_annotations(name, annotations, rules), key)


class NodeLoadCache:
    """Watch-fed store of every node's load (a :class:`shared.kube.watching.Store`)."""

    def __init__(self, rules: LoadRules) -> None:
        self._rules = rules
        self._nodes: dict[str, CachedLoad] = {}

    def __len__(self) -> int:
        return len(self._nodes)

    def get(self, name: str) -> CachedLoad | None:
        return self._nodes.get(name)

    def replace(self, items: Sequence[Node]) -> None:
        old = self._nodes
        self._nodes = {
            node.metadata.name: cached_load(
                node.metadata.name,
                node.metadata.annotations,
                self._rules,
                old.get(node.metadata.name),
            )
            for node in items
        }

    def apply(self, event: str, item: Node) -> None:
        name = item.metadata.name
        if event == "DELETED":
            self._nodes.pop(name, None)
        else:
            self._nodes[name] = cached_load(
                name, item.metadata.annotations, self._rules, self._nodes.get(name)
            )


def decode_node(raw: bytes | msgspec.Raw) -> Node:
    return NODE_DECODER.decode(raw)


class RequestMemo:
    """Decoded loads of nodes seen in full-node requests, bounded in size."""

    def __init__(self, rules: LoadRules, max_entries: int = 50_000) -> None:
        self._rules = rules
        self._max = max_entries
        self._nodes: dict[str, CachedLoad] = {}

    def load(self, node: Node) -> CachedLoad:
        name = node.metadata.name
        entry = cached_load(name, node.metadata.annotations, self._rules, self._nodes.get(name))
        if len(self._nodes) >= self._max and name not in self._nodes:
            self._nodes.clear()
        self._nodes[name] = entry
        return entry
