"""The rebalancer (leader only, ``spec.rebalance``): moves pods off nodes that stay above a
usage threshold through the Eviction API (:mod:`.controller`), with the decisions of
:mod:`shared.rebalance`; :mod:`.pods` keeps the bound pods its targets are judged with.
Imports nothing from :mod:`annotator.sync` or :mod:`annotator.quota`."""
