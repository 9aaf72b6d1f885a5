"""The job-dispatch room: ``/v1/jobs`` and ``/v1/cronjobs`` (:mod:`.routes`), templates
(:mod:`.templates`), the watch caches (:mod:`.caches`), authorization (:mod:`.authorizing`),
building Job bodies (:mod:`.building`) and the dispatcher that applies idempotency and
backpressure (:mod:`.dispatcher`). Imports nothing from :mod:`extender.scheduling`."""
