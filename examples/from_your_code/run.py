import asyncio

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from overnight.models import BudgetExtension, RunResult, RunSpec, RunStatus


async def supervise(client: Client, spec: RunSpec, workflow_id: str) -> RunResult:
    handle = await client.start_workflow(
        "AgentRun", spec, id=workflow_id, task_queue="overnight", result_type=RunResult
    )  # the run id is taken from the workflow id when the spec has none
    status = await handle.query("status", result_type=RunStatus)
    print(f"{status.run_id}: {status.state}, attempt {status.attempt}")
    await handle.signal("extend_budget", BudgetExtension(restarts=2, hours=4))
    result: RunResult = await handle.result()  # waits for the end: it may take all night
    return result


async def stop(client: Client, workflow_id: str, *, graceful: bool = True) -> None:
    handle = client.get_workflow_handle(workflow_id)
    if graceful:
        await handle.signal("cancel", "wrong branch")  # completes: outcome "cancelled"
    else:
        await handle.cancel()  # Temporal's cancellation: cleans up, then ends as Canceled


async def main() -> None:
    client = await Client.connect("localhost:7233", data_converter=pydantic_data_converter)
    spec = RunSpec(
        repo="https://github.com/acme/app.git",
        agent_dir="/srv/agents/minimal_agent",  # a folder on the worker's machine
        command="python3 /workspace/agent/main.py",
        secret_env=["GITHUB_TOKEN"],  # copied from the worker's environment, never in history
    )
    result = await supervise(client, spec, "fix-issue-42")
    print(result.outcome, result.attempts, result.restarts, result.checkpoint)
    print(result.checkpoint_json)  # the same checkpoint parsed, when it is JSON (else None)
    print(result.safety_net)  # what its restarts cost (docs: Leases and costs)


if __name__ == "__main__":
    asyncio.run(main())
