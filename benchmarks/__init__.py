"""fusedbench's asv suite: thin classes over fusedbench's catalog (see fusedbench/catalog/suites.py)."""
