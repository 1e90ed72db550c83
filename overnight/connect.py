"""The public import path of the Temporal connection, kept for users:
`await overnight.connect.connect()` (docs/encryption.md, docs/from-your-code.md). It lives in
the ground, `overnight.core.connect`; this re-exports its public names, the same objects.
overnight's own code imports `overnight.core.connect`, never this (.importlinter,
tests/ground/test_public_paths.py).
"""

from __future__ import annotations

from overnight.core.connect import UI_URL_ENV as UI_URL_ENV
from overnight.core.connect import connect as connect
from overnight.core.connect import default_ui_base as default_ui_base
from overnight.core.connect import unreachable as unreachable
from overnight.core.connect import web_ui_url as web_ui_url
