"""The local judge model for the end-to-end modules that need one and ask it for no key (a module that does, or
that needs another judge, defines its own ``judge``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.judge_serve import LocalJudge, judge_serve


@pytest.fixture(scope="module")
def judge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalJudge]:
    """``reverify judge-serve`` for the whole module, switched between tests through ``judge.control()``."""
    with judge_serve(tmp_path_factory.mktemp("judge_serve")) as judge:
        yield judge
