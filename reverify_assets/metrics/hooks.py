"""``compute_metrics`` hooks in two forms.

NeMo Gym's form is a function of every scored rollout grouped by task (``hook(tasks)``, tasks in index
order). A :class:`StreamingHook` is also such a function, but it is built on a :class:`TaskReducer` that
takes one task at a time and keeps only what its metrics need, so the aggregation can stream; calling it
with the tasks runs the same reducer. A hook given only in list form still works in a stream: its tasks
are collected for it (:class:`CollectedTasks`), at the memory cost that form implies.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

Row = Mapping[str, Any]
Tasks = Sequence[Sequence[Row]]
TasksHook = Callable[[list[list[Row]]], Mapping[str, Any]]


class TaskReducer(Protocol):
    def add_task(self, rollouts: Sequence[Row]) -> None:
        """The scored rollouts of the next task (tasks in index order)."""

    def finish(self) -> dict[str, Any]:
        """The hook's answer for every task added."""


class StreamingHook:
    """A ``compute_metrics`` hook callable with the tasks, whose reducer a stream can drive directly."""

    def __init__(self, start: Callable[[], TaskReducer], doc: str | None = None) -> None:
        self.start = start
        self.__doc__ = doc

    def __call__(self, tasks: Tasks) -> dict[str, Any]:
        reducer = self.start()
        for rollouts in tasks:
            reducer.add_task(rollouts)
        return reducer.finish()


class CollectedTasks:
    """Drives a list-form hook from a stream: keeps every task's rows until the end."""

    def __init__(self, hook: TasksHook) -> None:
        self._hook = hook
        self._tasks: list[list[Row]] = []

    def add_task(self, rollouts: Sequence[Row]) -> None:
        self._tasks.append(list(rollouts))

    def finish(self) -> dict[str, Any]:
        return dict(self._hook(self._tasks))


def reducer_for(hook: TasksHook) -> TaskReducer:
    return hook.start() if isinstance(hook, StreamingHook) else CollectedTasks(hook)
