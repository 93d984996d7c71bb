"""Human-in-the-loop in a real browser: approve, reject, reload, restart, other users."""

from __future__ import annotations

from pathlib import Path

from playwright.sync_api import Page, expect

from conftest import Demo, storage
from test_conversation import open_as, send, wait_for_reply
from thinwire.testing import LeakRecorder

APPROVED = "Done — $40 is on its way back for order 1234."
REJECTED = "Okay — no refund for order 1234."
ASKED = "Asked: Refund $40 on order 1234? — "


def ledger(demo: Demo) -> list[str]:
    path: Path = demo.data_dir / "ledger.log"
    return path.read_text().splitlines() if path.exists() else []


def ask_for_refund(page: Page) -> None:
    send(page, "I would like a refund")
    card = page.get_by_test_id("approval")
    expect(card).to_be_visible()
    expect(page.get_by_test_id("approval-prompt")).to_have_text("Refund $40 on order 1234?")
    expect(page.get_by_test_id("approval-payload")).to_contain_text("1234")
    # The page says what it waits for, and why Send is off.
    expect(page.get_by_test_id("status")).to_have_text("waiting for your answer")
    expect(page.get_by_test_id("status")).to_have_attribute("data-status", "idle")
    expect(page.get_by_test_id("composer-hint")).to_have_text("Answer the question above first.")
    expect(page.get_by_test_id("send")).to_be_disabled()
    asked = page.get_by_test_id("turn-asked")
    expect(asked).to_have_text(ASKED + "waiting for your answer below")
    expect(page.get_by_test_id("turn-ending")).to_have_count(0)


def test_approve(page: Page, own_demo: Demo, recorder: LeakRecorder) -> None:
    open_as(page, own_demo, "alice")
    ask_for_refund(page)
    assert ledger(own_demo) == ["lookup_order 1234"]  # asked before the side effect
    page.get_by_test_id("decide-approve").click()
    assert wait_for_reply(page, 2) == APPROVED
    expect(page.get_by_test_id("approval")).to_have_count(0)
    expect(page.get_by_test_id("composer-hint")).to_have_count(0)
    # The reply that asked says what it asked and what was decided — it was not cut short.
    asked = page.get_by_test_id("turn-asked")
    expect(asked).to_have_text(ASKED + "answered “Approve”")
    expect(page.get_by_test_id("turn-ending")).to_have_count(0)
    page.reload()  # the transcript keeps the answer
    expect(asked).to_have_text(ASKED + "answered “Approve”")
    assert ledger(own_demo) == ["lookup_order 1234", "issue_refund 1234 40"]
    recorder.assert_no_leak(page, own_demo.canaries)


def test_reject(page: Page, own_demo: Demo) -> None:
    open_as(page, own_demo, "alice")
    ask_for_refund(page)
    page.get_by_test_id("decide-reject").click()
    assert wait_for_reply(page, 2) == REJECTED
    expect(page.get_by_test_id("turn-asked")).to_have_text(ASKED + "answered “Reject”")
    assert ledger(own_demo) == ["lookup_order 1234"]


def test_stop_while_waiting_says_the_question_went_unanswered(page: Page, own_demo: Demo) -> None:
    open_as(page, own_demo, "alice")
    ask_for_refund(page)
    page.get_by_test_id("stop").click()
    expect(page.get_by_test_id("approval")).to_have_count(0)
    expect(page.get_by_test_id("turn-asked")).to_have_text(ASKED + "stopped before it was answered")
    expect(page.get_by_test_id("turn-ending")).to_have_count(0)  # the line above says it
    expect(page.get_by_test_id("status")).to_have_text("idle")
    expect(page.get_by_test_id("composer-hint")).to_have_count(0)  # nothing waits any more
    assert ledger(own_demo) == ["lookup_order 1234"]


def test_reload_while_waiting_then_approve(page: Page, own_demo: Demo) -> None:
    open_as(page, own_demo, "alice")
    ask_for_refund(page)
    page.reload()
    expect(page.get_by_test_id("approval-prompt")).to_have_text("Refund $40 on order 1234?")
    page.get_by_test_id("decide-approve").click()
    assert wait_for_reply(page, 2) == APPROVED
    assert ledger(own_demo) == ["lookup_order 1234", "issue_refund 1234 40"]


def test_restart_while_waiting_then_approve_happens_exactly_once(
    page: Page, own_demo: Demo, recorder: LeakRecorder
) -> None:
    open_as(page, own_demo, "alice")
    ask_for_refund(page)
    own_demo.restart()  # SIGKILL while the run waits for its decision
    page.reload()
    expect(page.get_by_test_id("approval-prompt")).to_have_text("Refund $40 on order 1234?")
    page.get_by_test_id("decide-approve").click()
    assert wait_for_reply(page, 2) == APPROVED
    # The order was looked up before the restart and is not looked up again.
    assert ledger(own_demo) == ["lookup_order 1234", "issue_refund 1234 40"]
    recorder.assert_no_leak(page, own_demo.canaries)


def test_another_user_cannot_see_or_answer_the_interrupt(page: Page, own_demo: Demo) -> None:
    open_as(page, own_demo, "alice")
    ask_for_refund(page)
    alice_id = storage(page, "localStorage")["thinwire:demo:alice:contextId"]
    interrupt_id = page.evaluate(
        "(id) => fetch(`/agents/demo/contexts/${id}`).then(r => r.json())"
        ".then(t => t.pendingInterrupt.interruptId)",
        alice_id,
    )
    page.get_by_test_id("user-select").select_option("bob")
    expect(page.get_by_test_id("status")).to_have_text("idle")
    expect(page.get_by_test_id("approval")).to_have_count(0)
    answer = page.evaluate(
        """async ([id, interruptId]) => {
            const response = await fetch(`/agents/demo/contexts/${id}/decisions`, {
                method: "POST",
                headers: {"content-type": "application/json"},
                body: JSON.stringify({interruptId, value: "approve"}),
            });
            return [response.status, await response.text()];
        }""",
        [alice_id, interrupt_id],
    )
    assert answer[0] == 404 and "context_not_found" in answer[1]
    assert ledger(own_demo) == ["lookup_order 1234"]
    page.get_by_test_id("user-select").select_option("alice")
    expect(page.get_by_test_id("approval-prompt")).to_have_text("Refund $40 on order 1234?")
