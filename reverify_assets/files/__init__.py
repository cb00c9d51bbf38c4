"""The files a run reads and writes: JSONL read line by line and written whole or not at all, their names, the
checks made on them before a run starts, the lock that makes one writer per output, and the Dagster home."""
