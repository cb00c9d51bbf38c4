"""The judge-call cache: the store of what judges answered (``store``), asked by the built-in judge server, and the
caching proxy put in front of NeMo Gym's judge model servers (``proxy``)."""
