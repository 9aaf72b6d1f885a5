"""``loadsched-dispatch-poll``: dispatch the rows of a read-only SQL query through the
extender's ``/v1/jobs``. Talks to the extender over HTTP only; SQLAlchemy is its optional
extra (``loadsched[poller]``)."""
