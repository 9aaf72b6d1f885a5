"""loadsched's annotator: syncs real node usage from Prometheus onto Node annotations."""
