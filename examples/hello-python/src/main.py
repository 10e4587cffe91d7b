"""A hello function: greets the `name` in the request body."""

import os

import humanize


def handler(event, context):
    body = event.get("body")
    name = body.get("name", "world") if isinstance(body, dict) else "world"
    greeting = os.environ.get("GREETING", "hello")
    return {
        "message": f"{greeting}, {name}!",
        "runtime": "python",
        "timeout": humanize.naturaldelta(context["timeoutSec"] or 30),
    }
