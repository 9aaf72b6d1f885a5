"""The scheduler-facing room: the ``filter``, ``prioritize`` and ``preempt`` verbs
(:mod:`.routes`, :mod:`.verbs`), the node view they decide from (:mod:`.node_view`), the
elastic-quota gate (:mod:`.quota_gate`), kube-scheduler's wire types (:mod:`.wire`), the
requeue nudges (:mod:`.requeue`) and their metrics (:mod:`.metrics`). Imports nothing from
:mod:`extender.dispatch`."""
