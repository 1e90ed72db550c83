"""The console (`overnight console`, issue 52): a web page of the night's runs for a person,
served by this process from Temporal alone (visibility, the `status` query, histories) through
the CLI's client settings. A roof beside `overnight.cli` and `overnight.worker`.

`app.build_app` makes the ASGI app; each page module (`runs_page`, `run_page`, `night_page`)
exports its `routes`; `auth` says who is looking, `render` draws templates under a strict
Content-Security-Policy. See docs/console.md.
"""
