"""``--resume``: what an earlier run already settled, read from its output and failures sidecar, and so skipped."""
