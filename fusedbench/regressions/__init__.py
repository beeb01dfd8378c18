"""Two runs compared, the verdict of the CI gate, its thresholds and their calibration."""
