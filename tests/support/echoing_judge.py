"""An OpenAI-compatible judge that refuses the key it is sent and quotes it back masked, as providers do."""

from __future__ import annotations

from aiohttp import web

from tests.support.loopback import LoopbackServer


def masked_forms(key: str) -> list[str]:
    """How providers show a refused key: all but its last 4 characters, its head and tail, its tail alone."""
    return [key[:-4] + "****", key[:8] + "*" * (len(key) - 12) + key[-4:], "sk-..." + key[-4:]]


class EchoingJudge(LoopbackServer):
    """Every chat completion is a 401 whose message quotes the presented Bearer token in each masked form."""

    def __init__(self) -> None:
        super().__init__()
        self.tokens: list[str] = []  # every token it was sent

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._refuse)
        return app

    async def _refuse(self, request: web.Request) -> web.Response:
        await request.read()
        token = request.headers.get("Authorization", "").removeprefix("Bearer ")
        self.tokens.append(token)
        message = f"Incorrect API key provided: {' / '.join(masked_forms(token))}. You can find your API key at ..."
        return web.json_response(
            {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": "invalid_api_key"}},
            status=401,
        )
