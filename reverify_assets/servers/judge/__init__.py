"""The built-in ``equivalence_judge`` resources server: NeMo Gym's equivalence LLM judge behind its HTTP protocol.

Modules: ``config`` (the block's fields), ``prompt`` (what the judge is asked), ``verdict`` (reading its
answer), ``judge_client`` (the call, its retries and their classification), ``failsafe`` (NeMo Gym's
``judge_failed`` row), ``redaction`` (keeping the API key out of everything we write), ``server``.
"""
