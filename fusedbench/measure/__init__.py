"""Measurement: references, verification, sampling, the records, and the GPU side (measure/gpu/)."""
