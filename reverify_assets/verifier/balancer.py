"""One address in front of several copies of a stateless server, for ``reverify serve`` (rescorings reach it by url).

Each request goes to the copy with the fewest in flight, as ``replicas.ReplicaSet`` does inside a run;
``/reverify_mode`` and ``/aggregate_metrics`` go to the first copy. ``GET /_replicas`` shows each copy with its
requests in flight and served. Copies may join while it serves; one that refuses connections (it died) is taken
out of the rotation while others remain, and said.
"""

from __future__ import annotations

from dataclasses import dataclass

import aiohttp
from aiohttp import web

TO_FIRST = frozenset({"/reverify_mode", "/aggregate_metrics"})
REPLICAS_ROUTE = "/_replicas"
# Hop-by-hop headers, and the ones aiohttp sets again for the body it sends.
_NOT_FORWARDED = frozenset({"host", "connection", "keep-alive", "transfer-encoding", "content-length", "upgrade"})


@dataclass
class _Replica:
    url: str
    in_flight: int = 0
    served: int = 0


class Balancer:
    def __init__(self, first_url: str) -> None:
        self.replicas = [_Replica(first_url.rstrip("/"))]
        self._session: aiohttp.ClientSession | None = None

    def add(self, url: str) -> int:
        """Another copy; how many there are now."""
        self.replicas.append(_Replica(url.rstrip("/")))
        return len(self.replicas)

    def app(self) -> web.Application:
        app = web.Application(client_max_size=1 << 30)
        app.router.add_get(REPLICAS_ROUTE, self._show)
        app.router.add_route("*", "/{tail:.*}", self._forward)
        app.on_startup.append(self._open)
        app.on_cleanup.append(self._close)
        return app

    async def _open(self, _: web.Application) -> None:
        # No limit of ours: the callers' concurrency is what the copies should see.
        self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0), timeout=aiohttp.ClientTimeout())

    async def _close(self, _: web.Application) -> None:
        if self._session is not None:
            await self._session.close()

    def _choose(self, path: str) -> _Replica:
        if path in TO_FIRST:
            return self.replicas[0]
        return min(self.replicas, key=lambda replica: replica.in_flight)

    async def _forward(self, request: web.Request) -> web.Response:
        assert self._session is not None
        replica = self._choose(request.path)
        headers = {name: value for name, value in request.headers.items() if name.lower() not in _NOT_FORWARDED}
        replica.in_flight += 1
        try:
            async with self._session.request(
                request.method, replica.url + request.path_qs, data=await request.read(), headers=headers
            ) as reply:
                body = await reply.read()
                return web.Response(body=body, status=reply.status, content_type=reply.content_type)
        except aiohttp.ClientConnectorError as exc:
            if len(self.replicas) > 1 and replica in self.replicas:
                self.replicas.remove(replica)
                print(f"the copy at {replica.url} refuses connections ({exc}): {len(self.replicas)} left", flush=True)
            return web.json_response({"detail": f"the copy at {replica.url} did not answer: {exc}"}, status=502)
        except aiohttp.ClientError as exc:
            return web.json_response({"detail": f"the copy at {replica.url} did not answer: {exc}"}, status=502)
        finally:
            replica.in_flight -= 1
            replica.served += 1

    async def _show(self, _: web.Request) -> web.Response:
        return web.json_response([{"url": r.url, "in_flight": r.in_flight, "served": r.served} for r in self.replicas])
