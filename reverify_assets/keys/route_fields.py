"""The fields of a materialized input row that pick its resources server, and their routes numbered.

A run's rows name a handful of distinct routes; each row keeps only its route's number.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

ROUTE_FIELDS = ("agent_ref", "task_source", "_ng_environment_server")


def route_fields(row: Mapping[str, Any]) -> dict[str, Any]:
    return {name: row[name] for name in ROUTE_FIELDS if name in row}


class RouteTable:
    """Routes numbered in the order they first appear; equal fields (as parsed JSON) share a number."""

    def __init__(self) -> None:
        self.routes: list[dict[str, Any]] = []
        self._ids: dict[str, int] = {}

    def id_of(self, fields: dict[str, Any]) -> int:
        signature = repr(sorted(fields.items()))
        route_id = self._ids.get(signature)
        if route_id is None:
            route_id = self._ids[signature] = len(self.routes)
            self.routes.append(fields)
        return route_id
