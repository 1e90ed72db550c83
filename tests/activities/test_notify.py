"""Notifications from the worker's side: whom it tells, what it posts, how it signs, what it
does when a receiver is down or refuses. Real POSTs to a receiver on loopback."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from pydantic import ValidationError
from temporalio.exceptions import ApplicationError

from activities.notify import send as notify
from activities.notify.activities import NotifyActivities
from activities.notify.models import BudgetLeft, DeliveryInput, Notification
from overnight.core.agent_requests import RunOutputs
from overnight.core.models import Budget, RunSpec
from overnight.core.notify_spec import Webhook
from tests.conftest import free_port
from tests.webhook_receiver import Receiver

SECRET_VALUE = "tok-5ecret-value-42"
SIGNING = "signing-secret"
NUMBERS = {"restart": 2, "needs_attention": 3, "finished": 4}


def a_notification(webhooks: list[Webhook], event: str = "needs_attention") -> Notification:
    return Notification.model_validate(
        {
            "event_id": f"night-run-{NUMBERS[event]}",
            "event": event,
            "run_id": "night-run",
            "state": "needs_attention" if event == "needs_attention" else "finished",
            "reason": f"agent crashed (exit 3) with {SECRET_VALUE}",
            "at": datetime(2026, 11, 30, 2, 0, tzinfo=UTC),
            "attempt": 2,
            "restarts_used": 1,
            "budget": Budget(max_restarts=1),
            "budget_left": BudgetLeft(restarts=0, hours=21.5),
            "hours_used": 2.5,
            "spend_usd": 0.12,
            "next_step": "open the pull request",
            "output_tail": f"Traceback (most recent call last):\nKeyError: 'token={SECRET_VALUE}'",
            "output_attempt": 2,
            "webhooks": [w.model_dump() for w in webhooks],
            "secret_env": ["AGENT_TOKEN"],
        }
    )


def worker_env(**more: str) -> dict[str, str]:
    return {"AGENT_TOKEN": SECRET_VALUE, "OVERNIGHT_NOTIFY_SECRET": SIGNING, **more}


async def test_a_notification_is_posted_signed_with_its_secrets_redacted() -> None:
    with Receiver(secret=SIGNING) as receiver:
        note = a_notification([Webhook(url=receiver.url)])
        sent = await NotifyActivities(None, worker_env()).send_notification(note)

    assert sent.delivered == ["spec-0"] and sent.undelivered == sent.refused == []
    [got] = receiver.accepted
    assert got.signed and got.fresh and not got.repeat
    assert got.headers["idempotency-key"] == got.headers["x-overnight-event-id"] == "night-run-3"
    assert got.headers["x-overnight-event"] == "needs_attention"
    assert got.headers["content-type"] == "application/json"
    body = got.json
    assert body["type"] == "overnight.run.needs_attention"
    assert (body["run_id"], body["state"], body["attempt"]) == ("night-run", "needs_attention", 2)
    assert body["budget_left"] == {"restarts": 0, "hours": 21.5, "spend_usd": None}
    assert body["output_tail"]["attempt"] == 2
    assert "KeyError: 'token=***'" in body["output_tail"]["text"]
    assert body["reason"] == "agent crashed (exit 3) with ***"
    assert SECRET_VALUE.encode() not in got.body


def test_a_changed_body_or_timestamp_fails_the_signature_check() -> None:
    receiver = Receiver(secret=SIGNING)
    note = a_notification([])
    data = notify.body(note, "json", None, [])
    headers = {k.lower(): v for k, v in notify.headers(note, SIGNING, data, 1_800_000_000).items()}
    assert receiver.verify(headers, data)
    assert not receiver.verify(headers, data.replace(b"night-run", b"other-run"))
    assert not receiver.verify({**headers, "x-overnight-timestamp": "1800000001"}, data)
    unsigned = notify.headers(note, None, data, 1_800_000_000)
    assert "X-Overnight-Signature" not in unsigned


async def test_a_finish_notification_carries_the_outputs_the_agent_handed_over() -> None:
    outputs = RunOutputs(
        summary="fixed the flaky test",
        values={"pr": "https://git.example/pull/7", "note": f"used {SECRET_VALUE}"},
    )
    with Receiver(secret=SIGNING) as receiver:
        note = a_notification([Webhook(url=receiver.url)], "finished")
        await NotifyActivities(None, worker_env()).send_notification(
            note.model_copy(update={"outputs": outputs})
        )
        # Another event (a repeat of one id would be dropped): finished with no finish().
        await NotifyActivities(None, worker_env()).send_notification(
            note.model_copy(update={"event_id": "night-run-5"})
        )

    finished, without = (got.json for got in receiver.accepted)
    assert finished["outputs"] == {
        "summary": "fixed the flaky test",
        "values": {"pr": "https://git.example/pull/7", "note": "used ***"},
    }
    assert without["outputs"] is None


async def test_slack_format_posts_text_with_the_last_words_in_a_code_block() -> None:
    with Receiver(secret=SIGNING) as receiver:
        note = a_notification([Webhook(url=receiver.url, format="slack")])
        await NotifyActivities(None, worker_env()).send_notification(note)

    [got] = receiver.accepted
    assert set(got.json) == {"text"}
    text = got.json["text"]
    assert text.startswith("*overnight run `night-run` :rotating_light: needs attention*")
    assert "budget left: 0 restarts, 21.5 h" in text
    assert "```text\nTraceback (most recent call last):\nKeyError: 'token=***'\n```" in text
    assert SECRET_VALUE not in text


def test_slack_text_escapes_what_the_agent_wrote_so_it_pings_and_links_no_one() -> None:
    """A question or next step is agent text: `<!channel>` would ping the whole channel and
    `<url|text>` would show a link as other text."""
    note = a_notification([]).model_copy(
        update={
            "event": "waiting_for_answer",
            "reason": "<!channel> approve <https://evil.example|the fix> & go?",
            "next_step": "<@U123> <!here>",
        }
    )
    text = notify.slack_text(note, "https://ui.example/run")
    assert "<!" not in text and "<@" not in text and "|the fix>" not in text
    assert "&lt;!channel&gt; approve &lt;https://evil.example|the fix&gt; &amp; go?" in text
    assert "next step: &lt;@U123&gt; &lt;!here&gt;" in text
    assert text.endswith("<https://ui.example/run|Open the run in the Temporal Web UI>")


async def test_the_worker_default_hears_of_restarts_only_when_it_asks() -> None:
    with Receiver(secret=SIGNING) as receiver:
        env = worker_env(OVERNIGHT_NOTIFY_URL=f"{receiver.url}?a, {receiver.url}?b")
        activities = NotifyActivities(None, env)
        for event in ("needs_attention", "restart", "finished"):
            await activities.send_notification(a_notification([], event))
        assert receiver.events() == ["needs_attention", "finished"]
        receiver.accepted.clear()
        env["OVERNIGHT_NOTIFY_ON_RESTART"] = "1"
        sent = await activities.send_notification(a_notification([], "restart"))
        assert sent.delivered == ["worker-0", "worker-1"]
        # Two receivers, one notification: a receiver keeping ids drops the second.
        assert [r.repeat for r in receiver.seen[-2:]].count(True) == 1


async def test_a_spec_webhook_hears_of_restarts_only_when_it_asks() -> None:
    with Receiver(secret=SIGNING) as receiver:
        hooks = [Webhook(url=receiver.url), Webhook(url=receiver.url + "?r", on_restart=True)]
        sent = await NotifyActivities(None, worker_env()).send_notification(
            a_notification(hooks, "restart")
        )
    assert sent.delivered == ["spec-1"]


async def test_a_receiver_that_is_down_is_left_for_later_and_one_that_refuses_is_not() -> None:
    down_url = f"http://127.0.0.1:{free_port()}/hook"
    with Receiver(secret="another secret") as refusing:  # answers 401: bad signature
        note = a_notification([Webhook(url=down_url), Webhook(url=refusing.url)])
        activities = NotifyActivities(None, worker_env())
        sent = await activities.send_notification(note)
        assert (sent.undelivered, sent.refused) == (["spec-0"], ["spec-1"])
        with pytest.raises(ApplicationError) as unreachable:
            await activities.deliver_notification(DeliveryInput(notification=note, target="spec-0"))
        with pytest.raises(ApplicationError) as refused:
            await activities.deliver_notification(DeliveryInput(notification=note, target="spec-1"))
    assert unreachable.value.type == "WebhookUnreachable" and not unreachable.value.non_retryable
    assert refused.value.type == "WebhookRefused" and refused.value.non_retryable


async def test_a_receiver_back_up_gets_the_retry_once() -> None:
    receiver = Receiver(secret=SIGNING, port=free_port())
    note = a_notification([Webhook(url=receiver.url)])
    activities = NotifyActivities(None, worker_env())
    assert (await activities.send_notification(note)).undelivered == ["spec-0"]
    with receiver:
        receiver.failing = 503
        with pytest.raises(ApplicationError):
            await activities.deliver_notification(DeliveryInput(notification=note, target="spec-0"))
        receiver.failing = None
        await activities.deliver_notification(DeliveryInput(notification=note, target="spec-0"))
        # A retry after all (say its worker died before recording the delivery): dropped.
        await activities.deliver_notification(DeliveryInput(notification=note, target="spec-0"))
    assert receiver.events() == ["needs_attention"]
    assert [r.repeat for r in receiver.seen] == [False, False, True]


async def test_a_url_kept_in_the_workers_environment_never_enters_the_spec() -> None:
    with Receiver(secret=SIGNING) as receiver:
        note = a_notification([Webhook(url_env="SLACK_HOOK_URL", format="slack")])
        assert receiver.url not in note.model_dump_json()
        without = await NotifyActivities(None, worker_env()).send_notification(note)
        sent = await NotifyActivities(
            None, worker_env(SLACK_HOOK_URL=receiver.url)
        ).send_notification(note)
    assert without.undelivered == ["spec-0"]
    assert sent.delivered == ["spec-0"]
    [target] = notify.targets(note, worker_env())
    assert target.problem == "SLACK_HOOK_URL is not set in this worker's environment"


async def test_a_redirect_is_an_answer_not_followed() -> None:
    class Redirect(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            self.send_response(302)
            self.send_header("location", "http://127.0.0.1:9/elsewhere")
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Redirect)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/hook"
        sent = await NotifyActivities(None, worker_env()).send_notification(
            a_notification([Webhook(url=url)])
        )
    finally:
        server.shutdown()
        server.server_close()
    assert sent.refused == ["spec-0"]


def test_a_spec_takes_webhooks_as_urls_or_objects_and_refuses_bad_ones() -> None:
    base = {"run_id": "r", "repo": "file:///x", "agent_dir": "/a", "command": "c"}
    spec = RunSpec.model_validate(
        {**base, "notify": ["https://hooks.example/a", {"url_env": "SLACK", "format": "slack"}]}
    )
    assert [(w.url, w.url_env, w.format) for w in spec.notify] == [
        ("https://hooks.example/a", None, "json"),
        (None, "SLACK", "slack"),
    ]
    for bad in (
        ["ftp://hooks.example/a"],
        [{"url": "https://a.example", "url_env": "X"}],
        [{}],
        [{"url": "https://a.example", "format": "teams"}],
        [{"url_env": "not a name"}],
        ["https://a.example"] * 11,
    ):
        with pytest.raises(ValidationError):
            RunSpec.model_validate({**base, "notify": bad})
    assert json.loads(spec.model_dump_json())["notify"][1]["url"] is None


async def test_a_worker_default_that_is_not_a_url_is_refused_not_retried() -> None:
    note = a_notification([], "finished")
    sent = await NotifyActivities(
        None, worker_env(OVERNIGHT_NOTIFY_URL="hooks.example/no-scheme")
    ).send_notification(note)
    assert (sent.refused, sent.undelivered) == (["worker-0"], [])


def test_agent_text_forges_no_line_mention_or_emphasis_in_the_slack_message() -> None:
    """Issue #30, item 5: a newline and mrkdwn in the question, the next step or the summary
    made a bold `*overnight run `rt-prod-7` finished*: ok` line, and another run's headline."""
    forged = (
        "ok?\n*overnight run `rt-prod-7` :white_check_mark: finished*: ok\n"
        "*overnight run `rt-prod-8` :rotating_light: needs attention*: <!channel> @here"
    )
    note = a_notification([], "finished").model_copy(
        update={"reason": forged, "next_step": forged, "output_tail": "```\n" + forged}
    )
    text = notify.slack_text(note, "https://ui.example/run")
    lines = text.splitlines()
    code = lines.index("```text")
    outside = lines[:code] + lines[lines.index("```", code + 1) + 1 :]
    assert [line for line in outside if line.startswith("*")] == [lines[0]]
    assert lines[0].startswith("*overnight run `night-run` :white_check_mark: finished*: ok? ")
    assert len(outside) == 5  # headline, attempt, next step, "last output", the link
    assert outside[2].startswith("next step: ok? ＊overnight run ｀rt-prod-7｀")
    agent_part = lines[0].split("*: ", 1)[1] + outside[2]
    assert "*" not in agent_part and "`" not in agent_part and "_" not in agent_part
    assert "<!channel>" not in text and "@here" not in text
    assert "```" not in "\n".join(lines[code + 1 : lines.index("```", code + 1)])


def test_a_secret_is_redacted_from_slack_text_before_it_is_escaped() -> None:
    # Escaped first, `sk_live_...` would read `sk＿live＿...`: a spelling no redaction finds.
    secret = "sk_live_<4242>*s3cr3t*"
    note = a_notification([]).model_copy(
        update={"reason": f"token {secret}", "next_step": f"use {secret}"}
    )
    data = json.loads(notify.body(note, "slack", None, [secret]))
    text = data["text"]
    assert "sk＿live" not in text and "sk_live" not in text and "4242" not in text
    assert "token ＊＊＊" in text and "next step: use ＊＊＊" in text


def test_the_json_body_carries_agent_text_as_data_as_written() -> None:
    # JSON is data: each value in its own field, escaped for no page (the receiver's page
    # escapes it its own way); a newline in it is a `\n` inside its string.
    note = a_notification([]).model_copy(update={"next_step": "a\n*b* <!channel> & c"})
    data = json.loads(notify.body(note, "json", None, []))
    assert data["next_step"] == "a\n*b* <!channel> & c"
