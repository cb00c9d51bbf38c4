"""The steps of a run, without Dagster: the start-up (config, scans, join, servers started ahead), the verify
step, the metrics and their coverage, shards merged. The assets call these (``defs``), and so do ``reverify
noise`` and ``reverify probe``, which make no Dagster run."""
