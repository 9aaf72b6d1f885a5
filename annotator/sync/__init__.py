"""Metric sync (leader only): one PromQL query per metric for all nodes (:mod:`.prometheus`,
:mod:`.rounds`), each metric on its own period (:mod:`.runner`), and the hot value from the
pods bound lately (:mod:`.bindings`, :mod:`.hot_value`), patched onto Node annotations.
Imports nothing from :mod:`annotator.quota`."""
