"""The MLP's settings, the seed notebook's where it has one: apart from `fusedbench.measure.mlp` so that the CLI can
name them in its help without importing numpy at start-up."""

OUTPUTS = 10  # digits
LEARNING_RATE = 0.1  # the notebook's
BATCH = 256  # the notebook's
SEED = 1234  # the notebook's seed value (numpy's generator: other weights than the notebook's, same law)
DEFAULT_HIDDEN = 30  # the notebook's
DEFAULT_EPOCHS = 60  # digits has 5 batches of 256 an epoch: 300 steps, enough for 0.9 at the notebook's rate
ACCURACY = 0.9  # the bar every version reaches at fp32 after DEFAULT_EPOCHS on digits
LOW_PRECISION_GAP = 0.02  # fp16 / bf16 within 2 points of fp32
