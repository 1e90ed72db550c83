"""overnight: durable supervision for AI coding agents, on Temporal."""

from overnight.core.models import Budget, BudgetExtension, RunResult, RunSpec, RunStatus

__all__ = ["Budget", "BudgetExtension", "RunResult", "RunSpec", "RunStatus"]
