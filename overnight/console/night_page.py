"""The night (`/night`, `/night.csv`): runs by outcome, spend, restarts by cause, what the
safety net cost, hours waited on people. The DATA helper's (issue 52).

A stub until then: `routes` is collected by `overnight.console.app.build_app`.
"""

from __future__ import annotations

from starlette.routing import BaseRoute

routes: list[BaseRoute] = []
