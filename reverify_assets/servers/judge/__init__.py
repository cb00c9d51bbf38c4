"""The built-in ``equivalence_judge`` resources server: NeMo Gym's equivalence LLM judge behind its HTTP protocol.

Modules: ``config`` (the block's fields), ``prompt`` (what the judge is asked), ``verdict`` (reading its
answer), ``judge_client`` (the call, its retries and their classification), ``failsafe`` (NeMo Gym's
``judge_failed`` row), ``server`` (which hands its API key to ``processes.secrets``, so that no run of it is
in anything the process writes, logs or raises).
"""
