/**
 * Messages: the runs a person starts — a send, a regeneration, an edit. Each
 * shows its turns at once (the view changes before any answer), streams its
 * run into a fresh reply, and carries a `messageId`, new for each, the same
 * for every try of it: a request whose answer never started is sent again
 * under it (see `run-reader.ts`), which the server answers with the run the
 * first try started, if it did.
 *
 * A regeneration and an edit fork the conversation: the reply shown (for an
 * edit, everything after the edited turn) leaves the view, and the new
 * exchange is numbered as the last of its alternatives until the run is over;
 * then the transcript is loaded again, so the sibling counts and the turns'
 * meta are the server's. So it is after any run that follows another turn
 * than the view's last (another tab's turns, or a clear: the view is
 * behind), after one that made another branch the one shown (`run_start`'s
 * `branchSwitched`: this view's, which another tab left — the exchanges shown
 * may have alternatives it never saw), and after one that ends with no title
 * shown (the server names a conversation after a message without a frame). A
 * request refused before its run began leaves no trace but the error: the
 * turns shown before it come back.
 *
 * A send and a regeneration name the last turn the view shows, so they go on
 * the branch the user sees even when another tab switched the server's to
 * another. When the conversation went on from that turn (another tab added
 * to it, or cleared it), the server refuses with `branch_moved`, records
 * nothing, and the transcript is loaded again: the user sees what it holds
 * now, and the rejection lets a UI restore the draft. So it is when the
 * server refuses with `context_busy`: a run this view did not see start holds
 * the conversation (another tab's), and the transcript names it. Either way a
 * run the transcript names is followed (`TranscriptLoader.refresh`) to its
 * end, the error still shown, after which the view is current and a message
 * goes at the first try.
 *
 * A message is shown at once, but its request waits for this client's own
 * requests that hold the conversation on the server (`Holds`: a branch switch
 * on its way), which would have it refused `context_busy`.
 */
import { aborted, toThinwireError, withInterruptId } from "./errors.js";
import type { EditRequest, Frame, RegenerateRequest, RunRequest, RunStartFrame } from "./generated/wire.js";
import type { Holds } from "./holds.js";
import type { Job } from "./job.js";
import { newMessageId } from "./message-id.js";
import type { RunReader } from "./run-reader.js";
import type { SendResult } from "./send-result.js";
import type { Turn } from "./snapshot.js";
import type { TranscriptLoader } from "./transcript-loader.js";
import type { Transport, TransportTarget } from "./transport.js";
import type { View } from "./view.js";

export interface MessagesOptions {
  transport: Transport;
  /** Read at each request, so changed headers are picked up. */
  target: () => TransportTarget;
  view: View;
  reader: RunReader;
  transcripts: TranscriptLoader;
  /** This client's requests that hold the conversation on the server: a message's waits for them. */
  holds: Holds;
}

/** What a message shows while its run streams, and how it asks for the run. */
interface Plan {
  /** The conversation, when it exists already. */
  contextId: string | null;
  /** The turns shown before the fresh reply, the last one of its exchange (whose numbers it takes). */
  turns: readonly Turn[];
  /** The request, with the message's `messageId` (null where the platform has no randomness). */
  open: (messageId: string | null, signal: AbortSignal) => AsyncIterable<Frame>;
  /** Load the transcript once the run is over (the conversation forked). */
  forks: boolean;
  /** The turn the run's first new turn should follow, where the view knows it. */
  after?: string | null;
}

export class Messages {
  readonly #transport: Transport;
  readonly #target: () => TransportTarget;
  readonly #view: View;
  readonly #reader: RunReader;
  readonly #transcripts: TranscriptLoader;
  readonly #holds: Holds;
  /** The conversation whose transcript was shown for want of a title (see `#untitled`). */
  #askedTitleOf: string | null = null;

  constructor(options: MessagesOptions) {
    this.#transport = options.transport;
    this.#target = options.target;
    this.#view = options.view;
    this.#reader = options.reader;
    this.#transcripts = options.transcripts;
    this.#holds = options.holds;
  }

  /**
   * Shows the message as a new user turn and streams the run it starts into a fresh reply.
   * It names the last turn shown (`afterTurnId`), so it goes on the branch this view
   * shows, whichever another tab shows (see `#stream` for a conversation that moved on).
   */
  send(request: RunRequest, job: Job): Promise<SendResult> {
    const { contextId, turns } = this.#view.snapshot;
    const follows = contextId !== null ? serverTurnId(turns[turns.length - 1]) : null;
    const user = this.#view.turn("user", request.message.text);
    let body: RunRequest | null = null;
    return this.#stream(
      {
        contextId,
        turns: [...turns, user],
        forks: false,
        ...(contextId !== null ? { after: turns[turns.length - 1]?.id ?? null } : {}),
        open: (messageId, signal) => {
          // One body for every try of the message.
          if (body === null) {
            body = { ...request };
            if (contextId !== null) body.contextId = contextId;
            if (messageId !== null) body.messageId = messageId;
            if (follows !== null) body.afterTurnId = follows;
          }
          return this.#transport.run({ ...this.#target(), body, signal });
        },
      },
      job,
    );
  }

  /**
   * Answers the last user message again: the replies after it leave the view for a fresh
   * one. It names the last turn shown (`turnId`): the reply of this view's branch is the
   * one answered again, whichever another tab shows.
   */
  regenerate(contextId: string, job: Job): Promise<SendResult> {
    const { turns } = this.#view.snapshot;
    const last = findLastIndex(turns, (turn) => turn.role === "user");
    const user = turns[last];
    const follows = serverTurnId(turns[turns.length - 1]);
    return this.#stream(
      {
        contextId,
        turns: user ? [...turns.slice(0, last), { ...user, ...nextAlternative(user) }] : turns,
        forks: true,
        open: (messageId, signal) => {
          const body: RegenerateRequest = {};
          if (messageId !== null) body.messageId = messageId;
          if (follows !== null) body.turnId = follows;
          return this.#transport.regenerate({ ...this.#target(), contextId, body, signal });
        },
      },
      job,
    );
  }

  /**
   * Sends `text` in place of the user turn `turn`: the turns after it leave
   * the view, and the turn shows the new text, as the newest alternative.
   */
  edit(contextId: string, turn: Turn, request: Pick<EditRequest, "message" | "data">, job: Job): Promise<SendResult> {
    const { turns } = this.#view.snapshot;
    const index = turns.findIndex((shown) => shown.id === turn.id);
    return this.#stream(
      {
        contextId,
        turns: [...turns.slice(0, index), { ...turn, text: request.message.text, ...nextAlternative(turn) }],
        forks: true,
        open: (messageId, signal) => {
          const body: EditRequest = { turnId: turn.id, ...request };
          if (messageId !== null) body.messageId = messageId;
          return this.#transport.edit({ ...this.#target(), contextId, body, signal });
        },
      },
      job,
    );
  }

  async #stream(plan: Plan, job: Job): Promise<SendResult> {
    const view = this.#view;
    const signal = job.signal;
    const before = view.snapshot.turns;
    view.openReply(plan.turns, { runId: null });
    // One key for every try of this message: a repeat after a cut response is then safe.
    const messageId = newMessageId();
    // The run follows another turn than the view's last: this client missed turns (another
    // tab's), which the transcript has — or the conversation was cleared (a null after turns).
    let behind = false;
    // The run first made another branch the one shown (this view's, which another tab left by
    // a switch, a regeneration or an edit): exchanges shown may have alternatives this client
    // never saw, and their sibling counts are the transcript's.
    let switched = false;
    const open = (stream: AbortSignal): AsyncIterable<Frame> =>
      noting(plan.open(messageId, stream), (start) => {
        // Undefined (an older server) says nothing.
        if (plan.after !== undefined && start.afterTurnId !== undefined && start.afterTurnId !== plan.after) behind = true;
        if (start.branchSwitched === true) switched = true;
      });
    const shown = this.#transcripts.shown;
    let result: SendResult;
    try {
      // Shown at once, sent once a branch switch of this client's on its way is answered.
      await this.#holds.released(signal);
      result = await this.#reader.follow(open, job, { repeatable: messageId !== null });
    } catch (caught) {
      if (signal.aborted) throw aborted(caught);
      let error = toThinwireError(caught);
      view.failRun(error, job.runKnown ? {} : { restore: before });
      if (error.code === "decision_pending" && plan.contextId !== null) {
        // The conversation waits for a decision this client did not know of (another tab, say): show it.
        const interrupt = await this.#transcripts.refresh(plan.contextId, signal, () => !job.superseded);
        if (signal.aborted) throw aborted(caught);
        if (error.interruptId === undefined && interrupt) error = withInterruptId(error, interrupt.interruptId);
      } else if (error.code === "context_busy" && plan.contextId !== null) {
        // The server's refusal (this client refuses its own before any request, and waits for
        // its own holds): a run this client did not see start holds the conversation —
        // another tab's. Show it, and follow it to its end, so the view is current for the
        // next message; the error shows why the message did not go meanwhile.
        await this.#transcripts.refresh(plan.contextId, signal, () => !job.superseded, { keepError: true });
        if (signal.aborted) throw aborted(caught);
      } else if (error.code === "branch_moved" && plan.contextId !== null) {
        // The conversation went on from the turn shown last (another tab's turns, a clear):
        // nothing was recorded; show what it holds now, for the user to send again — a run in
        // progress there followed, the error beside it as for context_busy. A clear drops a
        // title taken from a message: the next run's may name it anew.
        await this.#transcripts.refresh(plan.contextId, signal, () => !job.superseded, { keepError: true });
        if (signal.aborted) throw aborted(caught);
        this.#askedTitleOf = null;
      }
      throw error;
    }
    const untitled = this.#untitled(result.contextId, shown);
    if (plan.forks || behind || switched || untitled) {
      // The server's numbering of the alternatives, the turns' meta, the turns (and
      // alternatives) missed, the title; best effort, and dropped once a job that began since
      // changes the view.
      const refreshed = await this.#transcripts.refresh(result.contextId, signal, () => !job.superseded);
      if (signal.aborted) throw aborted();
      if (untitled && refreshed !== undefined) this.#askedTitleOf = result.contextId;
    }
    return result;
  }

  /**
   * The view has no title, and no transcript showed one since the run began
   * (the `shown` count then): the server names an untitled conversation after
   * the message that starts a run, without a `title` frame, so the view learns
   * that title only from the transcript. Shown once per conversation, for a
   * server that names none; asked again while it was not (the request failed,
   * or a job that began meanwhile dropped it).
   */
  #untitled(contextId: string, shown: number): boolean {
    if (this.#view.snapshot.title !== null || this.#transcripts.shown !== shown) return false;
    return this.#askedTitleOf !== contextId;
  }
}

/** The frames as they come, the run's `run_start` shown to `start` on the way. */
async function* noting(frames: AsyncIterable<Frame>, start: (frame: RunStartFrame) => void): AsyncIterable<Frame> {
  for await (const frame of frames) {
    if (frame.type === "run_start") start(frame);
    yield frame;
  }
}

/** A turn id as the server gives them (`TurnId`); a turn shown before its run announced its id has another. */
const SERVER_TURN_ID = /^turn-[0-9a-f]{12}-[ua][0-9]{1,4}$/;

/** The server's id of `turn`, or null: a view that shows no turn, or one the server has not named (an older server). */
function serverTurnId(turn: Turn | undefined): string | null {
  return turn !== undefined && SERVER_TURN_ID.test(turn.id) ? turn.id : null;
}

/** The numbers of a new alternative at the exchange of `turn`: the last of one more. */
function nextAlternative(turn: Turn): Pick<Turn, "siblings" | "siblingIndex"> {
  return { siblings: turn.siblings + 1, siblingIndex: turn.siblings };
}

function findLastIndex<T>(items: readonly T[], test: (item: T) => boolean): number {
  for (let index = items.length - 1; index >= 0; index--) if (test(items[index]!)) return index;
  return -1;
}
