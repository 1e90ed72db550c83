"""The markers of AgentRun's changes (`workflow.patched`), all of them: a run begun with one
has the change, a history recorded before it replays without. Runs begun with
`LEAN_WRITES_PATCH` have every marker before it without recording them.
"""

# Runs begun with this marker keep their sandboxes' leases (extend, wake at the lease end);
# histories recorded before it replay without.
LEASE_KEEPING_PATCH = "lease-keeping"
# Runs begun with this marker refuse a given run_id other than their workflow id.
RUN_ID_MATCH_PATCH = "run-id-matches-workflow-id"
# Runs begun with this marker end a Temporal cancellation as Canceled, not Completed.
CANCELED_PATCH = "temporal-cancel-ends-canceled"
# Runs begun with this marker first ask their worker whether it grants what the spec asks for
# (overnight/core/grants.py), and fail at once as `SpecRefused` if not, before anything is made.
SPEC_CHECK_PATCH = "worker-grants-spec-check"
# Runs that end with this marker keep the paused sandboxes of their failed attempts for
# `keep_failed_days`, labelled with when they may go (overnight.core.retention), instead of stopping
# them; histories recorded before it replay stopping them.
RETENTION_PATCH = "failed-sandboxes-kept"
# Runs begun with this marker act on the agent kit's requests (ask, wait_until, usage, finish:
# workflows.pure.kit_requests) and pause a running agent in place when its spend budget runs
# out, so an
# extension wakes the same process; histories recorded before it replay without.
AGENT_REQUESTS_PATCH = "agent-kit-requests"
# Runs begun with this marker keep what their restarts cost (workflows.pure.safety_net) for the
# status, the card and the result; runs begun before it report no figure (not a partial one).
SAFETY_NET_PATCH = "safety-net-cost"
# Runs begun with this marker, on a worker whose pool limits runs (overnight/core/admission.py), ask
# the pool's admission workflow for a place and wait in `queued` before anything is made, and
# give it back on every way out (workflows/admission_steps.py).
ADMISSION_PATCH = "admission-queue"
# Runs begun with this marker mark a question and a wait acted on apart (`SupervisorState.kit.
# wait_handled`): with one mark, a checkpoint holding an answered question and a far wait
# alternated between them, answering and pausing again for the hours left, for ever.
TALK_MARKS_APART_PATCH = "talk-marks-apart"
# Runs that meet a sandbox whose pause ended its agents (a local one with no cgroup to freeze:
# `SandboxInfo.pause_ends_agents`) start the agent again in it after the wake, from the
# checkpoint (workflows/same_sandbox_steps.py), no restart counted; before, the dead agent
# was a crash.
PAUSE_ENDS_AGENTS_PATCH = "pause-ends-agents-start-again"
# Runs begun with this marker give the time paused for questions and waits its own budget
# (`Budget.max_wait_hours`): a wait is clipped to what is left of it (not to the run hours,
# which waiting never uses), past it the run needs attention; and a run waiting longer than
# `admission_steps.STEP_OUT_AFTER` gives its admission place back and queues again to wake.
WAIT_BUDGET_PATCH = "wait-budget"
# Runs begun with this marker read the agent kit's requests from their own file beside the
# checkpoint (overnight.core.agent_requests.requests_path), watched and read with it, as well as
# from the checkpoint's `overnight` key (the file wins where both say something): an agent that
# saves its checkpoint its own way no longer drops them. Histories recorded before it replay
# reading the checkpoint alone.
REQUESTS_FILE_PATCH = "agent-requests-file"
# Runs of a coding agent (`RunSpec.agent`) begun with this marker take the adapter's exit
# code 76 (`overnight.core.agent_spec.LOOP_EXIT_CODE`) as a loop: a restart whose reason is the loop
# its checkpoint's last note names, a cause of its own. Asked only by runs with `agent`.
LOOP_EXIT_PATCH = "coding-agent-loop-exit"
# Runs begun with this marker send every step on a local sandbox after its create to the task
# queue of the host that made it (`<task queue>@<host>`, workflows.pure.hosts), and take a host
# whose queue had no poller for its `OVERNIGHT_HOST_LOST_SECONDS` as lost (a restart, cause
# `host lost`); histories recorded before it replay every step on the run's own queue.
HOST_QUEUES_PATCH = "sandbox-host-queues"
# Runs that meet this marker read the checkpoint once more before a stall restart, and go on
# watching the same agent if it moved on: a look that died with its worker, retried past the
# deadline with nothing left to wait, may have missed a write (workflows/stall_steps.py).
STALL_CONFIRMED_PATCH = "stall-confirmed"
# Runs that meet this marker give a look ending at the stall deadline a whole-look timeout of
# its wait plus `policies.DEADLINE_OBSERVE_GRACE` (its retries included), and look again at
# once, briefly, when it runs out: a look whose worker died, and then its retry's, no longer
# holds the stall past its deadline for the retry's full timeout or its heartbeat timeout
# (30 s and more). Each look lost so costs the grace, not more.
DEADLINE_LOOK_BOUNDED_PATCH = "deadline-look-bounded"
# Runs begun with this marker fail at once on what no retry fixes (workflows/pure/hopeless.py): a
# first create refused for good (a repo that does not exist or refuses, an agent_dir not on
# the worker, a spec the worker refuses), an agent whose command was not found at its first
# start; histories recorded before it replay waiting for a person, or restarting.
FAIL_FAST_PATCH = "fail-fast-hopeless"
# Runs begun with this marker take a paused sandbox as paused by its lease end when either its
# provider's lease end or the run's own record of it has come (`SupervisorState.sandbox.
# lease_end_either`): an extension that landed on a sandbox just paused at its lease end moved
# the provider's end past now, and the pause was taken for someone else's (issue #36).
LEASE_END_EITHER_PATCH = "lease-end-either-record"
# Runs that meet this marker, when their spec has `done_when`, run those checks in the sandbox
# after the agent exits 0 and start it again there with a failed one (workflows/done_steps.py).
DONE_CHECKS_PATCH = "done-checks"
# Runs that meet this marker, at an exit 0 whose spec has `done_when`, run those checks against
# the run's work pushed to the origin, in a fresh sandbox of their own (a clean clone at that
# commit: workflows/done_sandbox_steps.py), not in the agent's sandbox; `done_when_in_place`
# runs there. Histories recorded before it replay running `done_when` in the agent's sandbox.
DONE_CHECKS_FRESH_PATCH = "done-checks-fresh-sandbox"
# Runs that meet this marker at their first checkpoint, with `keep_workspace`, commit the
# workspace at every checkpoint change to `refs/overnight/<run_id>/<n>` and push it
# (workflows/workspace_steps.py), start a fresh sandbox from the latest kept one, and take
# the `rewind` update; histories recorded before it never ask it (their specs keep none).
WORKSPACE_KEPT_PATCH = "workspace-kept"
# Runs that meet this marker, when a fresh-context start finds its sandbox no longer running
# (its lease ended between the look that saw the exit and the start), look again instead of
# restarting: the look finds it paused at its lease end and wakes it, and the start is tried
# then, not used up (workflows/same_sandbox_steps.py); histories recorded before it replay the
# restart.
FRESH_START_LOOKS_AGAIN_PATCH = "fresh-start-looks-again"
# Runs that end with this marker keep a failed attempt's sandbox found running at the end
# (woken by a read after it was set aside: Runtime wakes a paused sandbox for a guest call, as
# `overnight logs --follow` makes) paused for the retention, as if still paused; before, it
# was stopped as a half-made one and the evidence was lost.
KEEP_WOKEN_ASIDE_PATCH = "keep-woken-set-aside"
# Runs of a coding agent that end with this marker free their session store on each host they
# used (`free_run_store`: its image or folder under `$OVERNIGHT_HOME/sessions/`) once their
# sandboxes ended; histories recorded before it replay leaving it to `overnight reap`.
RUN_STORE_FREED_PATCH = "run-store-freed"
# Runs begun with this marker take a local sandbox paused because its host went below the
# worker's floor of free space (`overnight.core.constants.HOST_FLOOR_PREFIX`) as needing attention
# with the sandbox paused where it stands (an extension wakes the same agent); runs begun
# before take it as paused from outside (a restart).
HOST_FLOOR_PATCH = "host-floor-in-place"
# Runs begun with this marker whose spec sends its model calls through the worker's gateway
# (overnight/core/model_access.py) count the gateway's figure of their model spend, and set the
# gateway's cap again when their spend budget is extended (workflows/model_steps.py); runs
# begun before count what their agent reported, as they did.
GATEWAY_MODELS_PATCH = "gateway-model-calls"
# Runs of an agent of one's own on Runtime whose model key is an egress secret
# (overnight/core/runtime_model_key.py) that end with this marker erase it at their end
# (`free_run_store`), as a coding agent's run does; histories recorded before it replay
# without the call.
RUNTIME_KEY_FREED_PATCH = "runtime-model-key-freed"
# Runs that finish with this marker finish only once their branch on the origin holds their
# work: the workspace committed as it stands, pushed from the sandbox and seen there by the
# worker (`confirm_pushed`), and with `RunSpec.pull_request` the branch's pull request opened
# or updated (`open_pull_request`); a push or a pull request that cannot be made leaves the
# run needing a person, its sandbox paused with the work (workflows/delivery_steps.py).
# Histories recorded before it replay finishing as the agent exits 0 (and its checks pass).
FINISHED_PUSHED_PATCH = "finished-means-pushed"
# Runs whose pull request asks `until_checks_pass` meet this marker at their first CI watch:
# they finish only once the pull request's checks pass, the agent started again in its sandbox
# with a failing check within `Budget.max_ci_rounds` (workflows/ci_steps.py). Only such runs
# ask it; no history recorded before holds one (the spec field was refused then).
CI_ROUNDS_PATCH = "ci-rounds"
# Runs with `keep_workspace` that meet this marker at a keep that could not be pushed need a
# person at once, the sandbox paused where it stands with the work in it, rather than going
# on with work only there; an extension (or `overnight push`) keeps again and goes on.
KEEP_HELD_PATCH = "keep-failure-held"
# Runs begun with this marker say as their last progress (the status, the card, the
# OvernightLastProgress search attribute) their agent's last checkpoint write, never the
# moments the stall clock starts again (a new sandbox, a wake, a fresh start); histories
# recorded before it replay publishing the stall clock's start as before.
PROGRESS_IS_CHECKPOINTS_PATCH = "progress-is-checkpoints"
# Runs begun with this marker publish what the console lists them by (issue 52): their
# owner, agent kind and labels as search attributes with their first upsert, and their row
# (overnight/core/run_row.py) in the memo under the lean rule of workflows/pure/row.py; histories
# recorded before it replay without (workflows/visibility.py).
ROW_PATCH = "console-row"

# Runs begun with this marker send notifications (workflows.notify_steps); histories recorded
# before it replay without.
NOTIFY_PATCH = "notifications"
# Runs begun with this marker write less: the namespace's search attributes come from the
# worker's cache through a local activity (workflows.calls.sandbox), and OvernightLastProgress
# follows state changes, or lags the truth by at most `visibility.LAST_PROGRESS_EVERY`.
# Histories recorded before it replay unchanged.
LEAN_WRITES_PATCH = "lean-visibility-writes"
# OvernightAdmission (workflows.admission_run) begun with this marker takes its limits from
# its worker, holds requests to its bounds and frees a place on `release` only once its
# holder is found out; histories recorded before it replay without.
TRUST_PATCH = "admission-trusts-its-worker"
# OvernightAdmission that meets this marker asks again, every `check_seconds`, a releasing
# holder that did not answer whether it is in a pool (its worker gone or slow), until it
# answers or closes; before, its release was dropped, and its place held until it closed.
ASK_AGAIN_PATCH = "admission-asks-unanswered-again"
# Runs that meet this marker count a checkpoint as progress only when its `progress_mark`
# changed, if it has one (the coding-agent adapter's: its tool calls done, its commit, its
# transcript): one rewritten with only new notes (the CLI retrying a model API it cannot
# reach) no longer holds the stall off. Asked only when a checkpoint's mark is the same as the
# last one's, which no history recorded before holds (no checkpoint had one).
PROGRESS_MARK_PATCH = "checkpoint-progress-mark"
# Runs that meet this marker, cancelled before their next sandbox's create was started (the
# `cancel` signal came while a restart set the last one aside, or while a pinned create asked
# whether its host is lost), start no create and end cancelled. Before, the create was started
# and cancelled in one workflow task: its activity never began, its handle raised a bare
# CancelledError, and the run failed with it. Asked only when a cancel came first, which no
# history recorded before holds (such runs failed).
NO_CREATE_AFTER_CANCEL_PATCH = "no-create-after-cancel"
# Runs that meet this marker take a look that came back early because the gateway's books of
# their model calls grew as news, not as a quiet look: they look again at once. Before, such a
# look was waited out on a timer to the next wake (the stall deadline), and the agent's exit
# right after its last model call went unseen until then. Asked only when a quiet look brought
# grown books, which only runs whose calls go through the gateway have.
BOOKS_ARE_NEWS_PATCH = "gateway-books-are-news"
# Runs begun with this marker carry their state on continue-as-new grouped by concern
# (`SupervisorState`'s groups, workflows/pure/state_shape.py); runs begun before it carry it
# flat, one key per field, as every run did: a worker of the code before it reads only that
# shape, and their chains never change shape midway. Both shapes are read.
STATE_GROUPED_PATCH = "state-grouped"
