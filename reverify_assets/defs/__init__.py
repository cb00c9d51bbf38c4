"""The Dagster layer. Content data versions on ``Output`` are deliberate; Dagster still labels them beta."""

import warnings

warnings.filterwarnings("ignore", message=r".*`data_version`.*is currently in beta")
