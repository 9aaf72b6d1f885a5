"""What an operator sees: the ``/ui`` status page and the ``/v1/status`` report behind it.
Composition layer: it reads both rooms (the scheduling room's node view and quota ledger, the
dispatch room's templates and watch caches), so neither room imports it."""
