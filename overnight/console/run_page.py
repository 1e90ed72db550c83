"""One run's page (`/runs/{run_id}`) and its live events: the RUN helper's (issue 52).

A stub until then: `routes` is collected by `overnight.console.app.build_app`.
"""

from __future__ import annotations

from starlette.routing import BaseRoute

routes: list[BaseRoute] = []
