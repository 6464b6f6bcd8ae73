"""The human tier of one gateway replica: the queue, the fold of reviewers' actions,
and what follows from a verdict.

A reviewer's request becomes an action on ``review-actions``; the request waits
until this replica's feed folds that action from the log (``fold``) and answers
with the verdict every replica reaches there (``review_ledger``). What follows from
an accepted action is done by the replica that published it, after the fold, and
only then: the audit event, the person's ``human`` reply (keyed by the person,
carrying the answer's id in a header and the answer's time as its own, so a reader
that sees it twice shows it once), the webhook call the replica won. So a reply
reaches a person only for an answer the log accepted, never for one whose claim
lost a race on another replica.

If the replica that took an answer stops between the fold and its publish, the
others notice: each replica that folds an accepted answer live checks after
``reply_grace_s`` that the reply reached the feed, and sends it if not (a reader
drops the second copy by the answer's time).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from coachbus.bus.erasure import Erasures, origin
from coachbus.contracts import (
    AgentResultAdapter,
    AnswerAction,
    ClaimAction,
    CloseAction,
    HumanReviewRequest,
    NotifyAction,
    ReleaseAction,
    RenewAction,
    Reply,
    ReviewAction,
    ReviewAuditEvent,
    utcnow,
)
from coachbus.contracts.payloads import CrisisScreen
from coachbus.contracts.review import SYSTEM_ACTOR
from coachbus.metrics import (
    REVIEW_ACTIONS,
    REVIEW_FIRST_ACTION,
    REVIEW_OLDEST_AGE,
    REVIEW_PENDING,
    REVIEW_WAIT_LIMIT,
)
from coachbus.safety.helplines import Helplines
from coachbus.safety.severity import SEVERITY_RANK
from coachbus.text import Language, Register
from services.gateway.review import ReviewQueue
from services.gateway.review_content import ReviewContent
from services.gateway.review_ledger import (
    Answer,
    Entry,
    ItemState,
    ReviewLedger,
    Verdict,
    began_before,
)
from services.gateway.review_settings import ReviewSettings
from services.gateway.review_webhook import Notice, ReviewWebhook
from services.gateway.turns import TurnStore, TurnView

log = logging.getLogger(__name__)

# Severities a new item pages someone for (the webhook).
URGENT = frozenset({"high", "critical"})
SEVERITIES = tuple(sorted(SEVERITY_RANK, key=SEVERITY_RANK.__getitem__))
# The header a reviewer's reply carries: which answer it delivers (see feed).
ANSWER_HEADER = "coachbus-answer-id"


@dataclass(frozen=True, slots=True)
class ReviewBus:
    """Where the desk writes: reviewers' actions, the audit, the person's replies."""

    action: Callable[[ReviewAction], Awaitable[None]]
    audit: Callable[[ReviewAuditEvent], Awaitable[None]]
    reply: Callable[[Reply, str], Awaitable[None]]


class NotConfirmed(TimeoutError):
    """The action was published but not folded back in time."""


class ReviewDesk:
    def __init__(
        self,
        queue: ReviewQueue,
        store: TurnStore,
        bus: ReviewBus,
        *,
        settings: ReviewSettings,
        content: ReviewContent,
        helplines: Helplines,
        erasures: Erasures | None = None,
        webhook: ReviewWebhook | None = None,
        ledger: ReviewLedger | None = None,
        replica: str | None = None,
        reply_grace_s: float = 15.0,
    ) -> None:
        self.queue = queue
        self.store = store
        self.ledger = ledger or ReviewLedger()
        self.settings = settings
        self.content = content
        self.helplines = helplines
        self.webhook = webhook
        self._bus = bus
        self._erasures = erasures
        # Names this process in the actions it publishes: the verdict's follow-up is
        # its to do.
        self.replica = replica or uuid.uuid4().hex[:12]
        self._ttl = timedelta(seconds=settings.claim_ttl_s)
        self._reply_grace_s = reply_grace_s
        self._waiting: dict[str, asyncio.Future[Verdict]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        # Called when a reviewer acts (the feed shortens its fetch wait at once).
        self.on_act: Callable[[], None] | None = None
        # Live listeners (the console's SSE): the version rises with every change.
        self.version = 0
        self.changed = asyncio.Condition()
        REVIEW_WAIT_LIMIT.set(settings.alert_after_s)

    # ------------------------------------------------------------------ from the feed

    def _erased(self, user_id: str, item_id: str, at: datetime) -> bool:
        if self.ledger.erased(item_id):
            return True
        return self._erasures is not None and self._erasures.predates(user_id, origin(item_id, at))

    async def add_request(self, request: HumanReviewRequest, *, live: bool) -> None:
        """An escalation from ``human-review``; ``live``: not a re-read after a restart."""
        if self._erased(request.user_id, request.turn_id, request.created_at):
            return
        state = self.ledger.get(request.turn_id)
        if state is not None and state.closed is not None:
            self.queue.resolve(request.turn_id)  # closed before it was read back
            return
        if not self.queue.add(request):
            return
        if (
            live
            and request.severity in URGENT
            and self.webhook is not None
            and (state is None or state.notifier is None)
        ):
            # Every replica offers; the first offer in the log wins (NotifyAction).
            self._spawn(self._offer_notice(request), "review-notify-offer")
        await self._touch()

    async def _offer_notice(self, request: HumanReviewRequest) -> None:
        await self._bus.action(
            NotifyAction(
                item_id=request.turn_id,
                user_id=request.user_id,
                session_id=request.session_id,
                reviewer_id=SYSTEM_ACTOR,
                replica=self.replica,
            )
        )

    async def fold(self, action: ReviewAction, *, live: bool) -> Verdict | None:
        """Fold one action read from ``review-actions`` (in log order)."""
        if self._erased(action.user_id, action.item_id, action.at):
            self._settle(action.action_id, Verdict(False, "erased"))
            return None
        verdict = self.ledger.fold(action)
        if verdict.duplicate:
            return verdict
        if verdict.accepted and isinstance(action, CloseAction):
            self.queue.resolve(action.item_id)
        if live and action.replica == self.replica:
            REVIEW_ACTIONS.labels(
                action.action, "accepted" if verdict.accepted else "refused"
            ).inc()
            self._follow_up(action, verdict)
        elif live and verdict.accepted and isinstance(action, AnswerAction):
            self._spawn(self._ensure_reply(action), "review-reply-check")
        else:
            self._settle(action.action_id, verdict)
        await self._touch()
        return verdict

    def _follow_up(self, action: ReviewAction, verdict: Verdict) -> None:
        if verdict.first_action:
            request = self.queue.get(action.item_id)
            if request is not None:
                waited = (action.at - request.created_at).total_seconds()
                REVIEW_FIRST_ACTION.labels(request.severity).observe(max(0.0, waited))
        if isinstance(action, NotifyAction):
            self._settle(action.action_id, verdict)
            if not verdict.accepted:
                return  # another replica's offer came first: it calls
            if self.webhook is not None:
                request = self.queue.get(action.item_id)
                if request is not None:
                    age = (utcnow() - request.created_at).total_seconds()
                    self.webhook.submit(Notice(action.item_id, request.severity, age))
        self._spawn(self._publish_follow_up(action, verdict), "review-follow-up")

    async def _publish_follow_up(self, action: ReviewAction, verdict: Verdict) -> None:
        try:
            if verdict.accepted and isinstance(action, AnswerAction):
                await self._bus.reply(_reply_of(action), action.action_id)
            await self._bus.audit(_audit_of(action, verdict))
        except Exception as exc:
            log.exception("review: follow-up of %s %s failed", action.action, action.action_id)
            self._fail(action.action_id, exc)
            return
        self._settle(action.action_id, verdict)

    async def _ensure_reply(self, action: AnswerAction) -> None:
        await asyncio.sleep(self._reply_grace_s)
        view = self.store.get(action.item_id, action.user_id)
        if view is not None and any(h.created_at == action.at for h in view.human):
            return
        if self._erased(action.user_id, action.item_id, action.at):
            return
        log.warning("review: answer %s was accepted but never sent; sending it", action.action_id)
        await self._bus.reply(_reply_of(action), action.action_id)

    def _settle(self, action_id: str, verdict: Verdict) -> None:
        waiter = self._waiting.pop(action_id, None)
        if waiter is not None and not waiter.done():
            waiter.set_result(verdict)

    def _fail(self, action_id: str, exc: BaseException) -> None:
        waiter = self._waiting.pop(action_id, None)
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)

    def _spawn(self, work: Awaitable[None], name: str) -> None:
        async def run() -> None:
            try:
                await work
            except Exception:
                log.exception("review: %s failed", name)

        task = asyncio.create_task(run(), name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _touch(self) -> None:
        async with self.changed:
            self.version += 1
            self.changed.notify_all()

    # ------------------------------------------------------------------ reviewers

    def item(self, item_id: str) -> tuple[HumanReviewRequest | None, ItemState | None]:
        return self.queue.get(item_id), self.ledger.get(item_id)

    def known(self, item_id: str) -> bool:
        request, state = self.item(item_id)
        return request is not None or state is not None

    async def act(self, *actions: ReviewAction) -> list[Verdict]:
        """Publish ``actions`` in order and wait for the verdict of each one's fold.

        Published one after the other on one key, they are folded in this order, so
        a claim, an answer and a close sent together stand or fall as the log says:
        an answer after a claim that lost is refused like any other."""
        loop = asyncio.get_running_loop()
        waiters: list[asyncio.Future[Verdict]] = []
        for action in actions:
            waiters.append(loop.create_future())
            self._waiting[action.action_id] = waiters[-1]
        if self.on_act is not None:
            self.on_act()
        try:
            for action in actions:
                await self._bus.action(action)
            async with asyncio.timeout(self.settings.confirm_timeout_s):
                return list(await asyncio.gather(*waiters))
        except TimeoutError as exc:
            raise NotConfirmed(actions[-1].action_id) from exc
        finally:
            for action in actions:
                self._waiting.pop(action.action_id, None)

    @property
    def awaiting(self) -> int:
        """Reviewers' requests waiting for their actions to come back from the log."""
        return len(self._waiting)

    def _base(self, item_id: str, reviewer_id: str) -> dict[str, Any]:
        request, state = self.item(item_id)
        source = request or state
        if source is None:
            raise KeyError(item_id)
        return {
            "item_id": item_id,
            "user_id": source.user_id,
            "session_id": source.session_id,
            "reviewer_id": reviewer_id,
            "replica": self.replica,
        }

    def claim_action(self, item_id: str, reviewer_id: str) -> ClaimAction:
        now = utcnow()
        return ClaimAction(**self._base(item_id, reviewer_id), at=now, expires_at=now + self._ttl)

    def renew_action(self, item_id: str, reviewer_id: str) -> RenewAction:
        now = utcnow()
        return RenewAction(**self._base(item_id, reviewer_id), at=now, expires_at=now + self._ttl)

    def release_action(self, item_id: str, reviewer_id: str) -> ReleaseAction:
        return ReleaseAction(**self._base(item_id, reviewer_id))

    def answer_action(
        self, item_id: str, reviewer_id: str, text: str, template: str | None
    ) -> AnswerAction:
        now = utcnow()
        language, _register = self.language_of(item_id)
        return AnswerAction(
            **self._base(item_id, reviewer_id),
            at=now,
            expires_at=now + self._ttl,
            text=text,
            template=template,
            language=language,
        )

    def close_action(self, item_id: str, reviewer_id: str, outcome: str, note: str) -> CloseAction:
        return CloseAction(**self._base(item_id, reviewer_id), outcome=outcome, note=note)

    def render_template(self, item_id: str, template_id: str) -> str:
        template = self.content.templates[template_id]
        return template.render(*self.language_of(item_id))

    def language_of(self, item_id: str) -> tuple[Language, Register | None]:
        """The item's turn's language and du/Sie, as far as this gateway knows them."""
        request, state = self.item(item_id)
        user_id = request.user_id if request is not None else state.user_id if state else ""
        view = self.store.get(item_id, user_id)
        if view is not None and view.language is not None:
            return view.language, view.address
        if view is not None:
            for reply in (view.final, view.coach):
                if reply is not None:
                    return reply.language, None
        return "en", None

    # ------------------------------------------------------------------ erasure

    def items_of(self, user_id: str, before: datetime | None) -> list[str]:
        """The user's items this replica knows of (of turns begun before ``before``)."""
        queued = [
            i for i in self.queue.items_of(user_id) if before is None or began_before(i, before)
        ]
        return sorted(set(queued) | set(self.ledger.items_of(user_id, before)))

    def drop_user(self, user_id: str, before: datetime | None = None) -> None:
        """Forget the user's items everywhere on this replica: queue, claims, answers."""
        items = self.items_of(user_id, before)
        self.queue.drop_user(user_id, before=before)
        self.ledger.drop_user(user_id, before=before)
        self.ledger.mark_erased(items)
        if items:
            self._spawn(self._touch(), "review-touch")

    async def audit_erased(self, item_ids: list[str]) -> None:
        """Record in the audit that these items existed and were erased (the replica
        that took the erase does this once)."""
        now = utcnow()
        for item_id in item_ids:
            await self._bus.audit(
                ReviewAuditEvent(
                    audit_id=f"{item_id}:erased",
                    item_id=item_id,
                    reviewer_id=SYSTEM_ACTOR,
                    action="erased",
                    at=now,
                    accepted=True,
                )
            )

    # ------------------------------------------------------------------ views

    def open_items(self) -> list[HumanReviewRequest]:
        """Open items, most severe first, then the longest waiting first."""
        out = []
        for request in self.queue.pending():
            state = self.ledger.get(request.turn_id)
            if state is None or state.closed is None:
                out.append(request)
        return out

    def summary(self, request: HumanReviewRequest, now: datetime) -> dict[str, Any]:
        state = self.ledger.get(request.turn_id)
        holder = state.holder_at(now) if state is not None else None
        claim = None
        if state is not None and holder is not None:
            claim = {
                "reviewer_id": holder,
                "since": _iso(state.claimed_at),
                "expires_at": _iso(state.expires_at),
            }
        return {
            **request.model_dump(mode="json"),
            "item_id": request.turn_id,
            "age_s": round((now - request.created_at).total_seconds(), 1),
            "claim": claim,
            "answers": len(state.answers) if state is not None else 0,
            "closed": _closing(state),
        }

    def detail(self, request: HumanReviewRequest, now: datetime) -> dict[str, Any]:
        """Everything a reviewer needs to act on one item (see the API's doc)."""
        state = self.ledger.get(request.turn_id)
        view = self.store.get(request.turn_id, request.user_id)
        language, register = self.language_of(request.turn_id)
        help_lines = self.helplines.as_json(language)
        # Each number once (the emergency number sits in several groups).
        lines = [line for group in help_lines["groups"] for line in group["lines"]]
        numbers = list(dict.fromkeys(n for line in lines for n in line["numbers"]))
        sent: dict[str, Any] = {"coach": None, "final": None}
        for kind in ("coach", "final"):
            reply: Reply | None = getattr(view, kind) if view is not None else None
            if reply is not None:
                carried = [n for n in numbers if n in reply.text]
                sent[kind] = {
                    "text": reply.text,
                    "tier": reply.tier,
                    "degraded": reply.degraded,
                    "help_lines": bool(carried),
                    "numbers": carried,
                }
        screen = _screen(view)
        return {
            "item": self.summary(request, now),
            "screen": {
                "decision": request.decision,
                "reason": request.reason,
                "severity": request.severity,
                **screen,
            },
            "sent": sent,
            "session": self._session(request),
            "language": language,
            "address": register,
            "locale": help_lines["locale"],
            "help_lines": help_lines,
            "answers": [_answer(a) for a in state.answers] if state is not None else [],
            "history": [_entry(e) for e in state.history] if state is not None else [],
            **self.content.catalogue(language, register),
        }

    def _session(self, request: HumanReviewRequest) -> list[dict[str, Any]]:
        """The person's recent turns of the item's session, oldest first (bounded)."""
        views = [
            v for v in self.store.turns_of(request.user_id) if v.session_id == request.session_id
        ][: self.settings.session_turns]
        out = []
        for view in reversed(views):
            said = view.said
            if said is None and view.turn_id == request.turn_id:
                said = request.excerpt  # the escalation carries the message itself
            out.append(
                {
                    "turn_id": view.turn_id,
                    "at": _iso(view.said_at),
                    "said": said,
                    "coach": view.coach.text if view.coach is not None else None,
                    "final": view.final.text if view.final is not None else None,
                    "human": [h.text for h in view.human],
                    "this_item": view.turn_id == request.turn_id,
                }
            )
        return out

    def refresh_metrics(self, now: datetime | None = None) -> None:
        now = now or utcnow()
        pending = dict.fromkeys(SEVERITIES, 0)
        oldest = dict.fromkeys(SEVERITIES, 0.0)
        for request in self.open_items():
            pending[request.severity] += 1
            state = self.ledger.get(request.turn_id)
            if state is not None and state.holder_at(now) is not None:
                continue  # someone is on it
            age = (now - request.created_at).total_seconds()
            oldest[request.severity] = max(oldest[request.severity], age)
        for severity in SEVERITIES:
            REVIEW_PENDING.labels(severity).set(pending[severity])
            REVIEW_OLDEST_AGE.labels(severity).set(oldest[severity])

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self.webhook is not None:
            await self.webhook.close()


def _reply_of(action: AnswerAction) -> Reply:
    # The answer's own time: a second copy of this reply (see _ensure_reply) is
    # recognised as the same by every reader (TurnStore de-duplicates on it).
    return Reply(
        turn_id=action.item_id,
        session_id=action.session_id,
        user_id=action.user_id,
        created_at=action.at,
        kind="human",
        text=action.text,
        tier="human",
        language=action.language,
    )


def _audit_of(action: ReviewAction, verdict: Verdict) -> ReviewAuditEvent:
    entry = Entry.of(action, verdict)
    return ReviewAuditEvent(
        audit_id=entry.action_id,
        item_id=action.item_id,
        reviewer_id=entry.reviewer_id,
        action=entry.action,
        at=entry.at,
        accepted=entry.accepted,
        reason=entry.reason,
        outcome=entry.outcome,
        template=entry.template,
    )


def _screen(view: TurnView | None) -> dict[str, Any]:
    """The crisis screen of the item's turn: Stability's, else the one Coach acted on."""
    if view is None:
        return {"category": None, "confidence": None, "basis": None, "plan": None}
    crisis: CrisisScreen | None = None
    for agent in ("stability", "coach"):
        data = view.agents.get(agent)
        if data is None:
            continue
        payload = AgentResultAdapter.validate_json(data).payload
        crisis = getattr(payload, "crisis", None)
        if crisis is not None:
            break
    if crisis is None:
        return {"category": None, "confidence": None, "basis": None, "plan": None}
    return {
        "category": crisis.category,
        "confidence": crisis.confidence,
        "basis": crisis.basis,
        "plan": crisis.plan,
    }


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _closing(state: ItemState | None) -> dict[str, Any] | None:
    if state is None or state.closed is None:
        return None
    c = state.closed
    return {"reviewer_id": c.reviewer_id, "at": c.at.isoformat(), "outcome": c.outcome}


def _answer(answer: Answer) -> dict[str, Any]:
    return {
        "answer_id": answer.answer_id,
        "reviewer_id": answer.reviewer_id,
        "at": answer.at.isoformat(),
        "text": answer.text,
        "template": answer.template,
    }


def _entry(entry: Entry) -> dict[str, Any]:
    return {
        "action_id": entry.action_id,
        "action": entry.action,
        "reviewer_id": entry.reviewer_id,
        "at": entry.at.isoformat(),
        "accepted": entry.accepted,
        "reason": entry.reason,
        "outcome": entry.outcome,
        "template": entry.template,
    }


class LoopbackBus:
    """The review log as lists, each action folded as it is published: the human
    tier of a gateway without a broker (unit tests, the HTTP-only test app)."""

    def __init__(self, publish_reply: Callable[[Reply], Awaitable[None]] | None = None) -> None:
        self.desk: ReviewDesk | None = None
        self.actions: list[ReviewAction] = []
        self.audits: list[ReviewAuditEvent] = []
        self.replies: list[tuple[Reply, str]] = []
        self._publish_reply = publish_reply

    async def action(self, action: ReviewAction) -> None:
        self.actions.append(action)
        if self.desk is not None:
            await self.desk.fold(action, live=True)

    async def audit(self, event: ReviewAuditEvent) -> None:
        self.audits.append(event)

    async def reply(self, reply: Reply, answer_id: str) -> None:
        self.replies.append((reply, answer_id))
        if self._publish_reply is not None:
            await self._publish_reply(reply)

    @property
    def bus(self) -> ReviewBus:
        return ReviewBus(action=self.action, audit=self.audit, reply=self.reply)
