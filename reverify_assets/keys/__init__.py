"""Rollout keys, ``(_ng_task_index, _ng_rollout_index)``: scanning a file for them (in a process of its own),
key indexes of a few integers a row, the join of rollouts to their input rows with the prompt identity check,
and key-ordered output."""
