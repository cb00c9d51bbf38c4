"""``--judge-failed-only``: which failed rows a judge recovery re-judges, and the merge of the recovered rows with the
successes carried over."""
