"""The rebalancer (leader only, ``spec.rebalance``): moves pods off nodes that stay above a
usage threshold through the Eviction API (:mod:`.controller`), with the decisions of
:mod:`shared.rebalance`, :mod:`shared.overload_streaks` and :mod:`shared.rebalance_marks`;
:mod:`.full_pod` is what it reads of a pod to judge whether it may move, :mod:`.status` what
it publishes, :mod:`.pods` the bound pods its targets are judged with.
Imports nothing from :mod:`annotator.sync` or :mod:`annotator.quota`."""
