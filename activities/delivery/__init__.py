"""A finished run's delivery: its work confirmed on its branch, its pull request, its CI, and
its done checks (in their own clean sandbox, or the agent's)."""
