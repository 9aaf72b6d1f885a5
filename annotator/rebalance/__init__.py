"""The rebalancer (leader only, ``spec.rebalance``): moves pods off nodes that stay above a
usage threshold through the Eviction API, with the decisions of :mod:`shared.rebalance`,
:mod:`shared.overload_streaks`, :mod:`shared.rebalance_limits` and
:mod:`shared.rebalance_marks`. :mod:`.controller` runs the rounds; :mod:`.candidates` judges
the pods that may move and :mod:`.nodes` the targets they may go to; :mod:`.moving` carries
out a node's plan, :mod:`.marking` writes the marks it leaves; :mod:`.reading` reads the pods
on a node and their usage; :mod:`.full_pod` is what it reads of a pod to judge whether it may
move, :mod:`.status` what it publishes and :mod:`.publishing` the publishing; :mod:`.pods` the
bound pods its targets are judged with.
Imports nothing from :mod:`annotator.sync` or :mod:`annotator.quota`."""
