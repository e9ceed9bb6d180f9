"""The console's jinja2 environment and the one way views answer with a page."""

from __future__ import annotations

import os
from datetime import datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.templating import Jinja2Templates

templates = Jinja2Templates(directory=os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates"))


def _ts(millis: int | None) -> str:
    """Epoch millis as the local time operators read in mqadmin's output."""
    if not millis or millis <= 0:
        return "-"
    return datetime.fromtimestamp(millis / 1000).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


templates.env.filters["ts"] = _ts


def render(request: Request, name: str, status_code: int = 200, **context: Any) -> Response:
    return templates.TemplateResponse(request, name, context, status_code=status_code)
