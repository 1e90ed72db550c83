"""The fakes of what cannot run here, and every test double, in one place: tests and benchmarks
build on them, so `bench/` never depends on `tests/`. Installed with overnight are only
`model_api/`, `github_api/` and `git_http.py`, which `overnight demo --agent` plays on (the
package's other modules ride along in the wheel, unused; its other folders do not).

- `fakes/runtime/`: the Runtime HTTP API on loopback, strict as the real one (the real
  `withruntime` SDK talks to it);
- `fakes/model_api/`: the model APIs the coding-agent CLIs speak, scripted turn by turn;
- `github_api/`: GitHub's REST API on loopback (pull requests, checks, rate limits, ETags);
- `git_http.py`: a loopback git server over smart HTTP;
- `provider.py`: a sandbox provider whose agents cost nothing (benchmarks of many runs,
  admission);
- `activities.py`: the scripted sandbox world AgentRun's time-skipping tests run against, its
  activities registered by name as the real ones are.
"""
