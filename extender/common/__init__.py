"""The kit both rooms and the status page use: who a caller is and what they may do
(:mod:`~extender.common.access`), and the JSON routers' route class
(:mod:`~extender.common.routing`). It imports neither room, the status page nor the
composition root."""
