"""The ``/v1/jobs`` and ``/v1/cronjobs`` routers."""
