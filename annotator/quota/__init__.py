"""The elastic-quota controller (leader only): ``status.used`` of every ElasticQuota, the
quotas it cannot read reported, lent capacity reclaimed by evictions through the Eviction API
(:mod:`.controller`, :mod:`.evicting`). Imports nothing from :mod:`annotator.sync`."""
