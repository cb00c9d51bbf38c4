"""What a server's base URL may be: http or https, with a host, and a port if any. Checked when the config loads,
so that a URL nothing could answer at is an error naming its key before anything starts."""

from __future__ import annotations

from urllib.parse import urlsplit

SCHEMES = ("http", "https")


def url_problem(url: object) -> str | None:
    """What is wrong with ``url`` as a base URL, said as what it should be; None when nothing is."""
    if not isinstance(url, str):
        return "it is an http:// or https:// URL"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:  # a port that is not a number, or out of range; a malformed IPv6 host
        return f"it is not a URL ({exc})"
    if parts.scheme not in SCHEMES:
        return f"it is an http:// or https:// URL{_scheme_hint(url)}"
    if not parts.hostname:
        return "it names no host"
    if port == 0:
        return "port 0 is not one a server listens on"
    if parts.query or parts.fragment or any(c.isspace() for c in url):
        return "a base URL holds no query, fragment or spaces"
    return None


def _scheme_hint(url: str) -> str:
    # `localhost:8000` splits as scheme "localhost": a host and port without a scheme.
    try:
        with_scheme = urlsplit(f"http://{url}")
        if "://" not in url and with_scheme.hostname and with_scheme.port:
            return f" (did you mean `http://{url}`?)"
    except ValueError:
        pass
    return ", such as http://127.0.0.1:8000"
