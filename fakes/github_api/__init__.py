"""A loopback fake of the GitHub REST API a run needs to open, update and watch its pull
request, held to GitHub's documented behaviour: the pull request lookup by head branch, the
`422` of a second one ("A pull request already exists for owner:branch."), labels, check runs
and commit statuses, pull request templates, ETags and `304`s, the `x-ratelimit-*` headers,
the primary and secondary rate limits, `5xx`s and dropped connections on demand, and the
token check. `routes.py` serves, `world.py` holds the data, `limits.py` the limits and the
scripted failures, `server.py` the `FakeGitHub` a test starts.
"""

from fakes.github_api.limits import Fault
from fakes.github_api.server import ENTERPRISE_PREFIX, FakeGitHub, Recorded
from fakes.github_api.world import CheckRun, CommitStatus

__all__ = ["ENTERPRISE_PREFIX", "CheckRun", "CommitStatus", "FakeGitHub", "Fault", "Recorded"]
