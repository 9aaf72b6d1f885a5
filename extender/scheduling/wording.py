"""How filter answers word a refusal: crane's message naming the node and its value, or one
phrase per reason (``--filter-messages``)."""

from __future__ import annotations

from shared.load_model import (
    MessageStyle,
    Need,
    Verdict,
    reason_message,
    reason_refusal_for,
    refusal_for,
)

NOT_CACHED_CLOSED = "node[{}] is not in the extender's node cache yet; staleData is failClosed"
NOT_CACHED_REASON = "node(s) not in the extender's node cache yet (staleData is failClosed)"


class Wording:
    """How filter answers word a refusal (:data:`shared.load_model.MessageStyle`): crane's
    message naming the node and its value, or one phrase per reason."""

    __slots__ = ("hot_limit", "per_node")

    def __init__(self, style: MessageStyle = "per-node", hot_limit: int = 0) -> None:
        self.per_node = style == "per-node"
        self.hot_limit = hot_limit

    def overload(self, verdict: Verdict) -> str | None:
        """The refusal of a node rejected on its own (``None`` when it passes)."""
        if self.per_node or verdict.overload is None:
            return verdict.overload
        return reason_message(verdict, self.hot_limit)

    def with_pod(
        self, verdict: Verdict, need: Need, name: str
    ) -> tuple[str, tuple[str, str]] | None:
        """The refusal of a node without room for the pod's estimate (estimation)."""
        if self.per_node:
            return refusal_for(verdict, need, name)
        return reason_refusal_for(verdict, need)

    def not_cached(self, name: str) -> str:
        """The refusal, under failClosed, of a node the cache lacks."""
        return NOT_CACHED_CLOSED.format(name) if self.per_node else NOT_CACHED_REASON


PER_NODE = Wording()
"""crane's wording."""
