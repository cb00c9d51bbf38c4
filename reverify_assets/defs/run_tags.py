"""The tags on every run the project makes, however launched: what the UI's run list shows and filters by."""

RESCORING_TAG = "reverify/rescoring"  # the rescoring's label (<name> or <name>__<variant>) of shard and aggregate runs
VARIANT_TAG = "reverify/variant"
CONFIG_TAG = "reverify/config_hash"  # the verifier config the run scores with
COMMAND_TAG = "reverify/command"  # the `reverify` command that made the run
OUTPUT_TAG = "reverify/output"  # of a `reverify run`
