"""The pages of docs/reference, one module per page, each from the code it describes
(``scripts/reference.py`` writes and checks them)."""
