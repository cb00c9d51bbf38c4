"""``reverify compare``: the paired comparison of two scorings of the same rollouts, joined by key."""
