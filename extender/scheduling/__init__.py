"""The scheduler-facing room: the ``filter``, ``prioritize`` and ``preempt`` verbs
(:mod:`.routes` over HTTP, :mod:`.verbs` the decisions), decided by a :class:`.tally.Tally`
per filter call and encoded by :mod:`.answers`, kept between requests by :mod:`.memos`; the
node view they read (:mod:`.node_view`), fed by the watch-fed cache (:mod:`.node_cache`) and
worded by :mod:`.wording`; the elastic-quota gate (:mod:`.quota_gate`), kube-scheduler's wire
types (:mod:`.wire`), the requeue nudges (:mod:`.requeue`) and their metrics
(:mod:`.metrics`). Imports nothing from :mod:`extender.dispatch`."""
