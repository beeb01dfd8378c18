"""Two codes measured side by side on one GPU and judged: the layer that drives `measure/` and asks `regressions/`
for the verdict (`regressions/` judges recorded cells and imports nothing of `measure/`)."""
