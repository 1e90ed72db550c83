"""Every activity call of overnight's workflows, one module per kind of step, each call with
its timeouts and retry policy as one bundle of `workflows.policies` (`**policies.X.options()`,
tests/workflows/test_activity_options.py) and a summary for the Web UI.

Activities are called by registered name (`activities.models.ActivityName`) with their input
and result models, so no workflow imports a provider. Nothing outside this package calls an
activity (tests/workflows/test_calls_home.py): a step module asks one of these functions, and
a failure a step can live with comes back through `outcomes.best_effort` / `outcomes.outcome`.
"""
