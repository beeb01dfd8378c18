"""The catalog: what can be measured (epilogs, dtypes, shapes, providers, suites) and the model of a cell."""
