"""A local OpenAI-compatible judge model for the ``equivalence_judge`` server's demo and tests.

It answers ``POST /v1/chat/completions`` with a deterministic verdict (:mod:`verdict_rule`) and can be told
to fail (:mod:`settings`), at start (``reverify judge-serve``) or at run time (``POST /control``).
"""
