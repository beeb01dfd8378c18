"""asv's results read into tidy tables, and which run is which (newest, baseline)."""
