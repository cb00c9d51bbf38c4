"""A row on its way through a verifier: the request made of it, the answer routed to the output or the sidecar,
its reward and judge spend, and what the client and the servers agree on (retries, throttling, the ready line)."""
