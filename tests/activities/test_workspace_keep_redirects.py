"""A keep goes to the origin the spec names, or is not reported pushed (the local provider, real
sandboxes, a real bare origin): the agent's git config cannot send it elsewhere
(`url.*.pushInsteadOf`, `url.*.insteadOf`, `remote.*.pushurl`, in its HOME or its clone), and a
push the sandbox reports but the origin, asked by the worker, lacks is `failed`.

On the code before (issue 47), the keeps under an `insteadOf` or `pushInsteadOf` went to the
decoy, or nowhere, and were `pushed` all the same, as was the keep behind the link
(`remote.origin.pushurl` never moved a push to an explicit path; `remote.<url>.pushurl` does,
for a URL origin: tests/e2e/test_keeps_reach_the_origin.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from activities.providers.local.engine import LocalEngine
from activities.sandbox.activities import SandboxActivities
from tests.activities.test_workspace_kept import (  # noqa: F401 (fixtures)
    acts,
    agent_dir,
    create,
    engine,
    in_origin,
    keep,
    origin,
    sh,
    spec,
)

DECOY = "/workspace/decoy.git"
# Each way the agent's git config could send a push to its decoy instead of the origin.
REDIRECTS = {
    "HOME pushInsteadOf": "git config --global url.{decoy}.pushInsteadOf {origin}",
    "HOME insteadOf": "git config --global url.{decoy}.insteadOf {origin}",
    "clone pushInsteadOf": "git config url.{decoy}.pushInsteadOf {origin}",
    "clone insteadOf": "git config url.{decoy}.insteadOf {origin}",
    "clone remote.origin.pushurl": "git config remote.origin.pushurl {decoy}",
}


@pytest.mark.timeout(180)
async def test_the_agents_git_config_cannot_send_a_keep_to_a_decoy(
    acts: SandboxActivities,  # noqa: F811
    engine: LocalEngine,  # noqa: F811
    origin: Path,  # noqa: F811
    agent_dir: Path,  # noqa: F811
) -> None:
    run = spec(origin, agent_dir)
    sid = (await create(acts, run, 1)).sandbox_id
    await sh(engine, sid, f"git init -q --bare {DECOY}")
    undo = "git config --global --remove-section url.{decoy} 2>/dev/null; "
    undo += "git config --remove-section url.{decoy} 2>/dev/null; "
    undo += "git config --unset remote.origin.pushurl; true"
    for number, (name, redirect) in enumerate(REDIRECTS.items(), start=1):
        await sh(engine, sid, undo.format(decoy=DECOY))
        await sh(engine, sid, redirect.format(decoy=DECOY, origin=origin))
        await sh(engine, sid, f"echo {number} > work.txt")

        kept = await keep(engine, run, sid, number)

        # Ignored: the keep is on the origin, with the commit it reported, and not in the decoy.
        assert kept.outcome == "pushed", (name, kept.detail)
        assert in_origin(origin, "rev-parse", kept.ref or "") == kept.commit, name
        assert in_origin(origin, "show", f"{kept.ref}:work.txt") == str(number), name
        decoy = await sh(engine, sid, f"git -C {DECOY} for-each-ref")
        assert decoy.strip() == "", name


@pytest.mark.timeout(180)
async def test_a_keep_the_origin_does_not_hold_is_failed_whatever_the_sandbox_says(
    acts: SandboxActivities,  # noqa: F811
    engine: LocalEngine,  # noqa: F811
    origin: Path,  # noqa: F811
    agent_dir: Path,  # noqa: F811
) -> None:
    """The origin is bound writable into the sandbox: the agent turns its `refs/overnight` into
    a link to a folder only the sandbox sees. The push lands there, in the sandbox's view, and
    the script says `pushed`; the origin on the host holds nothing."""
    run = spec(origin, agent_dir)
    sid = (await create(acts, run, 1)).sandbox_id
    hidden = "/tmp/overnight-hidden-refs"
    await sh(
        engine,
        sid,
        f"mkdir -p {hidden} && rm -rf {origin}/refs/overnight && "
        f"ln -s {hidden} {origin}/refs/overnight && echo one > work.txt",
    )

    kept = await keep(engine, run, sid, 1)

    assert kept.outcome == "failed", kept
    assert kept.commit is None and kept.ref is None
    assert "the sandbox said it pushed" in kept.detail
    assert "the origin has no such ref: not kept" in kept.detail
    # The sandbox did push (in its own view): only the worker's look tells the two apart.
    assert (await sh(engine, sid, f"ls {hidden}")).strip() == run.run_id
    assert in_origin(origin, "for-each-ref", "refs/overnight") == ""
