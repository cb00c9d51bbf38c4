"""Judge budgets: what a judge's tokens cost (``prices``, the config's ``judge_prices``), how many a prompt takes
(``token_estimate``), and when a run stops sending rows (``judge_budget``: ``--max-judge-calls``, ``--max-cost``).
The dry run counts with the same pieces: ``run.census`` and ``cli.dry_run``."""
