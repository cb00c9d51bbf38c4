"""The Dagster layer. Content data versions on ``Output`` and the aggregate's mapping to the shards' config dimension
are deliberate; Dagster still labels them beta."""

import warnings

warnings.filterwarnings("ignore", message=r".*`data_version`.*is currently in beta")
warnings.filterwarnings("ignore", message=r".*`MultiToSingleDimensionPartitionMapping` is currently in beta")
