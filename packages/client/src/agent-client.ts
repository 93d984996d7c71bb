/**
 * AgentClient: a small store over one conversation with one agent.
 *
 * It owns the wire (requests, dedupe by `seq`, reconnect, hydration of the
 * public transcript) and remembers exactly one thing about the conversation:
 * its `contextId`. Everything else is derived view state, rebuilt from the
 * server. `subscribe` / `getSnapshot` follow the `useSyncExternalStore` contract.
 *
 * A broken stream is not a failed run: the server keeps running it, so the
 * client attaches again with the last `seq` it applied and the run's remaining
 * frames arrive exactly once. When the run ended while the client was away
 * (the attach has nothing to send), the transcript has its reply. A send cut
 * before its first frame is sent again under the same `messageId`, which the
 * server answers with the run the first try started, if it did.
 *
 * A run may stop to ask a person (an `interrupt` frame, then `done` with stop
 * reason `interrupted`); the question is `snapshot.interrupt` until `decide()`
 * answers it, which streams the continued run (a new run of the same context)
 * exactly like a send, or `stop()` ends the waiting run. Meanwhile nothing
 * else can be sent: the server would refuse it with `decision_pending`.
 *
 * A conversation branches: `regenerate()` answers the last message again and
 * `edit()` sends a message in place of an earlier one, each on a new branch
 * (the server keeps the old one as a sibling); `switchBranch()` shows another
 * (reading no run, it holds nothing: a job begun meanwhile drops its answer).
 * The server holds the conversation while it switches, as for a run: a job
 * begun meanwhile shows what it shows at once and makes its request once the
 * switch is answered (`holds.ts`), and so does one begun while the server
 * ends a run waiting for a decision.
 * Turns carry the server's ids, so a view keys them the same before and
 * after a reload. `open()` switches the client to another conversation.
 *
 * A long conversation is loaded a page at a time (`pageSize` exchanges, the
 * last ones first); `loadEarlier()` shows the page before the first turn
 * shown. It is no job: it may go while a run streams, which it leaves alone
 * (the streaming reply is the last turn, and stays so), and its answer is
 * dropped when the conversation shown changed meanwhile.
 *
 * A transcript is loaded again after a transient failure (the connection, a
 * 5xx, a retryable error), status `hydrating` meanwhile, with the `reconnect`
 * backoff and limit. When that gives up, status is `error`, and the client
 * remembers that the conversation shown was never loaded: `clearError()` and
 * `open()` of the same id load it again, until a transcript of it is shown.
 *
 * Another tab may act on the conversation shown. On a `tabChannel` (`tabs.ts`)
 * the tabs tell each other of the runs they start and end, and a tab that
 * shows the conversation, idle, loads its transcript again. A transcript
 * loaded again (that, a decision refused as answered elsewhere, a message or
 * a branch switch the server refused with `context_busy`, a run that ended
 * unseen, a fork's sibling counts) may name a run in progress this view did not read: it is
 * followed, as `start()` follows one — beside the refusal that found it,
 * which stays shown. A request refused because the
 * conversation is gone (`context_not_found`: deleted elsewhere) forgets it,
 * as a load does, and shows the error: the next send starts a new one.
 *
 * Every run the client reads — a send's, a decision's, a regeneration's, an
 * edit's, the one `start()` or a reload found in progress — ends in `onFinish` (its
 * result) or `onError` (its failure), and a run that failed on the server in
 * both. An error is shown until `clearError()` or the next send. The client
 * is free as soon as the snapshot says the run is over (idle or error): a
 * send from a listener, `onFinish` or `onError` is taken, and what the ended
 * run's job still does (a refresh of the transcript) yields to it.
 *
 * This file is the store, its commands and the lifecycle of their jobs; the
 * work lives beside it, each job in one place: `view.ts` (the state and its
 * changes), `messages.ts` (send, regenerate, edit), `run-reader.ts` (frames
 * into the view, reconnect), `transcript-loader.ts` (hydrate, refresh,
 * settle, branches), `decisions.ts`.
 */
import { type AgentClientOptions, checkOptionNames } from "./agent-client-options.js";
import { isContextId } from "./context-id.js";
import { Decisions } from "./decisions.js";
import {
  aborted,
  branchNotFound,
  busy,
  decisionPending,
  disposed,
  invalidRequest,
  notAUserTurn,
  noSuchAlternative,
  nothingToRegenerate,
  ThinwireError,
  toThinwireError,
  turnNotFound,
  withInterruptId,
} from "./errors.js";
import { type EditRequest, MAX_TRANSCRIPT_PAGE, type RunRequest } from "./generated/wire.js";
import { Holds } from "./holds.js";
import { type CredentialsMode, globalFetch } from "./http.js";
import { Job } from "./job.js";
import { Messages } from "./messages.js";
import { Notifier } from "./notifier.js";
import { pageSizeOption } from "./page-size.js";
import { baseUrlOption } from "./base-url.js";
import { reconnectLimits } from "./reconnect.js";
import { initialReducerState, type ReducerState } from "./reduce.js";
import { RunReader } from "./run-reader.js";
import { requestData, type SendOptions } from "./send-options.js";
import type { SendResult } from "./send-result.js";
import { emptySnapshot, type Snapshot, type Status } from "./snapshot.js";
import { SseTransport } from "./sse-transport.js";
import { type TabNews, Tabs } from "./tabs.js";
import { type ActiveRun, TranscriptLoader } from "./transcript-loader.js";
import { requestTarget, type Transport, type TransportTarget } from "./transport.js";
import { type CommitOptions, View } from "./view.js";
import { WebSocketTransport } from "./websocket-transport.js";

export type { AgentClientOptions } from "./agent-client-options.js";
export type { SendOptions } from "./send-options.js";
export type { SendResult } from "./send-result.js";


/**
 * Shows a new title in a client that shows that conversation: how a
 * `ConversationList` tells the client it shares of a rename. Internal to the
 * package: not exported by its index, and left out of its declarations.
 *
 * @internal
 */
export function showTitle(client: AgentClient, contextId: string, title: string | null): void {
  titleShower(client, contextId, title);
}

/**
 * The title a page of a `ConversationList` gives a conversation, for the
 * client that shows it — unless the page may be older than the client's
 * title. Called as the page is asked for, it returns what to call with the
 * title the page lists once it is loaded (see `#listedTitle` for the rule).
 * Internal to the package, as `showTitle` is.
 *
 * @internal
 */
export function listedTitle(client: AgentClient): (contextId: string, title: string | null) => void {
  return titleLister(client);
}

/**
 * Tells `listener` of each conversation the client forgets because the server
 * says it is gone (`context_not_found`: deleted elsewhere) — a load's or a
 * request's — before its subscribers hear of the change: how a
 * `ConversationList` drops it. Returns the unsubscribe function. Internal to
 * the package, as `showTitle` is.
 *
 * @internal
 */
export function onForgotten(client: AgentClient, listener: (contextId: string) => void): () => void {
  return forgetFollower(client, listener);
}

/**
 * Tells `listener` when the server lists the conversations otherwise, though
 * no run this client reads ended: it showed another branch, or another tab
 * (on its `tabChannel`) ran, renamed or forgot one. How a `ConversationList`
 * knows to load the list again. Returns the unsubscribe function. Internal to
 * the package, as `showTitle` is.
 *
 * @internal
 */
export function onListChanged(client: AgentClient, listener: () => void): () => void {
  return listFollower(client, listener);
}

/**
 * Tells the other tabs on the client's `tabChannel` that the list changed (a
 * rename, a forget). Internal to the package, as `showTitle` is.
 *
 * @internal
 */
export function tellListChanged(client: AgentClient): void {
  listTeller(client);
}

/** The way in to a client's private `#showTitle`, set once by its class (so declared before it). */
let titleShower: (client: AgentClient, contextId: string, title: string | null) => void;
/** The way in to a client's private `#listedTitle`, likewise. */
let titleLister: (client: AgentClient) => (contextId: string, title: string | null) => void;
/** The way in to a client's listeners of forgets, likewise. */
let forgetFollower: (client: AgentClient, listener: (contextId: string) => void) => () => void;
/** The way in to a client's listeners of list changes, likewise. */
let listFollower: (client: AgentClient, listener: () => void) => () => void;
/** The way in to a client's tabs, likewise. */
let listTeller: (client: AgentClient) => void;

export class AgentClient {
  readonly #options: AgentClientOptions;
  readonly #notifier: Notifier;
  readonly #view: View;
  readonly #transport: Transport;
  /** The client created the transport, so `dispose()` closes it. */
  readonly #ownsTransport: boolean;
  readonly #transcripts: TranscriptLoader;
  readonly #reader: RunReader;
  readonly #decisions: Decisions;
  readonly #messages: Messages;
  /** This client's requests that hold the conversation on the server without reading a run (see `holds.ts`). */
  readonly #holds = new Holds();
  /** The send, decision, regeneration or edit in flight, until its run ends (see `#announce`); a branch switch until its guards passed. */
  #run: Job | null = null;
  /** The run found in progress by `start()`, until it ends. */
  #following: Job | null = null;
  /**
   * Every job not over yet — those finishing up after their run ended, and the
   * side jobs (`#side`) included: what `reset()` cancels, and what a job that
   * begins supersedes.
   */
  readonly #jobs = new Set<Job>();
  #hydration: { controller: AbortController; promise: Promise<void> } | null = null;
  /** The `loadEarlier()` in flight. */
  #earlier: { job: Job; promise: Promise<void> } | null = null;
  #started = false;
  #disposed = false;
  /** Told of each conversation forgotten as gone from the server (see `onForgotten`). */
  readonly #forgetListeners = new Set<(contextId: string) => void>();
  /** Told when the list changed without a run of this client's ending (see `onListChanged`). */
  readonly #listListeners = new Set<() => void>();
  /** The other tabs on `tabChannel`, once the client is used (never while a server renders). */
  #tabs: Tabs | null = null;
  /** The transcript loaded again because another tab ran in the conversation shown. */
  #catchingUp: Job | null = null;

  constructor(options: AgentClientOptions) {
    if (!options.agent) throw new TypeError("AgentClient needs an agent name.");
    checkOptionNames(options);
    baseUrlOption(options.baseUrl);
    const pageSize = pageSizeOption(options.pageSize, {
      fallback: DEFAULT_PAGE_SIZE,
      max: MAX_TRANSCRIPT_PAGE,
      unbounded: true,
    });
    this.#options = options;
    const fetchImpl: typeof fetch = options.fetch ?? globalFetch;
    this.#notifier = new Notifier(
      options.schedule,
      options.minNotifyInterval === undefined ? {} : { minInterval: options.minNotifyInterval },
    );
    this.#view = new View(
      options.contextId ?? null,
      (previous, next, commit) => this.#announce(previous, next, commit),
      // A streaming frame's delta: a change of nothing but the reply, as `#announce` batches one.
      () => this.#notifier.changed(true),
    );
    const option = options.transport ?? "sse";
    if (options.WebSocket !== undefined && option !== "websocket") {
      throw new TypeError(
        'AgentClient uses the WebSocket option with transport: "websocket" only; a transport you pass in has its own.',
      );
    }
    this.#ownsTransport = typeof option === "string";
    const requests = { fetch: fetchImpl, credentials: options.credentials ?? "same-origin" };
    this.#transport = typeof option === "string" ? createTransport(option, requests, options.WebSocket) : option;
    const target = () => this.#target();
    const view = this.#view;
    const reconnect = reconnectLimits(options.reconnect);
    const follow = (contextId: string, active: ActiveRun) => this.#followFound(contextId, active);
    this.#transcripts = new TranscriptLoader(requests, target, view, pageSize, reconnect, follow);
    this.#reader = new RunReader({
      transport: this.#transport,
      target,
      view,
      transcripts: this.#transcripts,
      reconnect,
    });
    const parts = {
      transport: this.#transport,
      target,
      view,
      reader: this.#reader,
      transcripts: this.#transcripts,
      holds: this.#holds,
    };
    this.#decisions = new Decisions(parts);
    this.#messages = new Messages(parts);
  }

  /** Registers a listener for snapshot changes; returns the unsubscribe function. */
  subscribe = (listener: () => void): (() => void) => this.#notifier.subscribe(listener);

  /** The current view state: the same object until something changes. Always the latest, even while a notification is batched. */
  getSnapshot = (): Snapshot => this.#view.snapshot;

  /**
   * Loads the transcript of the conversation the client was created with, and
   * follows the run in progress if there is one (status `streaming` until it
   * ends). Idempotent; resolves once the transcript is shown, never rejects
   * (failures land in the snapshot, and in `onError`). A transient failure
   * (`network_error`, a 5xx, a retryable error such as a 429) is tried again
   * with the `reconnect` backoff, status `hydrating` meanwhile. An id the
   * server does not know (`context_not_found`) is forgotten quietly, and so is
   * one of another shape than the server's, without a request.
   */
  start(): Promise<void> {
    this.#joinTabs();
    if (this.#hydration) return this.#hydration.promise;
    const contextId = this.#view.snapshot.contextId;
    if (this.#started || this.#disposed || this.#run || contextId === null) {
      this.#started = true;
      return Promise.resolve();
    }
    this.#started = true;
    if (!isContextId(contextId)) {
      this.#view.clear(); // a stored id included: `onContext(null)` removes it
      return Promise.resolve();
    }
    return this.#hydrate(contextId);
  }

  /**
   * Shows another conversation: cancels the work in flight as `reset()` does
   * (a run goes on on the server; a pending `send()` rejects with `aborted`),
   * tells `onContext`, then loads its transcript and follows a run in
   * progress, as `start()` does. Resolves once the transcript is shown, never
   * rejects; an id the server does not know is forgotten quietly (a new
   * conversation), and so is one of another shape than the server's, without
   * a request. Opening the conversation shown changes nothing while it
   * loads, or once it is loaded and shows no error; a conversation whose load
   * gave up is loaded again, whatever the status.
   *
   * ```ts
   * await client.open(summary.contextId); // a conversation picked in the user's list (ConversationList)
   * ```
   */
  open(contextId: string): Promise<void> {
    if (typeof contextId !== "string" || contextId === "") throw new TypeError("open() needs a conversation id.");
    if (this.#disposed) return Promise.resolve();
    this.#joinTabs();
    const { contextId: shown, status } = this.#view.snapshot;
    if (contextId === shown && this.#started) {
      if (this.#hydration) return this.#hydration.promise;
      if (status !== "error" && !this.#transcripts.unloaded(shown)) return Promise.resolve();
    }
    this.#abortAll();
    this.#started = true;
    if (!isContextId(contextId)) {
      this.#view.clear();
      return Promise.resolve();
    }
    this.#view.commit(initialReducerState(emptySnapshot(contextId)));
    return this.#hydrate(contextId);
  }

  /** Loads the transcript of `contextId` into the view and follows a run in progress. */
  #hydrate(contextId: string): Promise<void> {
    const controller = new AbortController();
    this.#view.show({ status: "hydrating", error: null });
    // Once over, it is no request of ours any more: nothing may abort it. Over before
    // `onError` hears of a failure, so a `clearError()` from there loads it again.
    const over = () => {
      if (this.#hydration?.controller === controller) this.#hydration = null;
    };
    const promise = this.#transcripts.hydrate(contextId, controller.signal).then(
      (active) => {
        over();
        if (active && !controller.signal.aborted) this.#resume(contextId, active);
      },
      (error: unknown) => {
        over();
        this.#failed(error);
      },
    );
    this.#hydration = { controller, promise };
    return promise;
  }

  /**
   * Sends a message and streams the reply into the snapshot, reconnecting when
   * the stream breaks. Resolves with the final reply (stop reason `stopped`
   * after `stop()`, `interrupted` when the run asks a person: the question is
   * then `snapshot.interrupt`); rejects with a ThinwireError (`invalid_request`
   * for empty text, `context_busy` while another run is being read,
   * `decision_pending` with its `interruptId` while a decision is pending,
   * the server's error code, `network_error` or `stream_interrupted` once
   * reconnecting gave up, `aborted`). A `context_not_found` (the conversation
   * was deleted elsewhere) also forgets the conversation: an empty view under
   * no id, the error shown, `onContext(null)`; the next send starts a new one.
   *
   * Every send carries a fresh `messageId`. When it fails before any frame of
   * its run arrived in a way that leaves open whether the server took it (the
   * connection dropped, a 5xx, a retryable error other than `context_busy`,
   * `rate_limited`, `too_many_runs` or `too_many_streams`), it is sent again with the same id,
   * text and `data`, status `reconnecting`, with the `reconnect` backoff and
   * limit: the server streams the run the first try started, or starts it now.
   *
   * A send is allowed after an error (status `error`), and clears it; and as
   * soon as the snapshot says the run before it is over — from `onFinish`, or
   * a listener that sees status `idle`.
   *
   * It names the last turn the view shows, so it goes on the branch shown here
   * whatever another tab switched to. When the conversation went on from that
   * turn (another tab added to it, or cleared it), it rejects with
   * `branch_moved`, nothing recorded, once the transcript is shown again: the
   * user's draft is for the UI to restore.
   *
   * When the server refuses it with `context_busy` — a run this client did not
   * see start holds the conversation: another tab's — it rejects with that,
   * shown as any refusal (`error`, `onError`), once the transcript is shown
   * again; and the client follows that run, as `start()` follows one (status
   * `streaming`, its end to `onFinish`), the error still shown beside it. Once
   * the run is over the view is current: the next send goes at the first try.
   * Likewise for a regeneration, an edit and a branch switch. (A send made
   * while a `switchBranch()` of this client's is on its way is no such case:
   * it waits for the switch's answer, see there.)
   *
   * ```ts
   * await client.send("What is in my cart?", { data: { page: "/cart" } }); // the agent reads run.data
   * ```
   */
  send(text: string, options: SendOptions = {}): Promise<SendResult> {
    const blank = typeof text !== "string" || text.trim() === "";
    const data = options.data === undefined ? null : requestData(options.data);
    const body: RunRequest = { message: { text } };
    let refusal = blank ? new ThinwireError("invalid_request", "The message text is empty.") : null;
    if (data instanceof ThinwireError) refusal ??= data;
    else if (data !== null) body.data = data;
    return this.#job(
      refusal,
      () => this.#noDecisionPending(),
      (job) => this.#messages.send(body, job),
    );
  }

  /**
   * Answers the last user message again, on a new branch, and streams the new
   * reply like `send()`: the reply shown leaves the view for it (the server
   * keeps it, as the sibling `switchBranch()` shows again), and the user turn,
   * of a new exchange, gets a new id with the run's first frame. Once the run is
   * over the transcript is loaded again, so the turns' `siblings` and
   * `siblingIndex` are the server's. Resolves with the new run's result.
   *
   * Rejects like `send()` — `context_busy`, `decision_pending`, `disposed`,
   * `aborted`, the server's refusal — and with `nothing_to_regenerate` when
   * there is no reply to regenerate (no request is made without a
   * conversation). A refusal brings the reply back into the view. Retried
   * under its `messageId` like a send.
   *
   * ```ts
   * const { text } = await client.regenerate(); // the new reply; the old one is a sibling
   * ```
   */
  regenerate(): Promise<SendResult> {
    let contextId: string | null = null;
    return this.#job(
      null,
      () => {
        this.#noDecisionPending();
        contextId = this.#view.snapshot.contextId;
        if (contextId === null) throw nothingToRegenerate();
      },
      (job) => this.#messages.regenerate(contextId!, job),
    );
  }

  /**
   * Sends `text` in place of the user turn `turnId`, on a new branch that
   * forks at that turn, and streams the reply like `send()`: the turns after
   * it leave the view (they stay on the other branch), and the turn shows the
   * new text. `data` as for `send()`. Once the run is over the transcript is
   * loaded again, for the server's sibling counts. Resolves with the new run's
   * result.
   *
   * Rejects like `send()`, and with `turn_not_found` (no such turn is shown;
   * no request made) or `not_a_user_turn` (a reply cannot be edited), or the
   * server's refusal of either. A refusal brings the turns back into the view.
   *
   * ```ts
   * const first = client.getSnapshot().turns[0]!;
   * await client.edit(first.id, "What about tomorrow?");
   * ```
   */
  edit(turnId: string, text: string, options: SendOptions = {}): Promise<SendResult> {
    const blank = typeof text !== "string" || text.trim() === "";
    const data = options.data === undefined ? null : requestData(options.data);
    const request: Pick<EditRequest, "message" | "data"> = { message: { text } };
    let refusal = blank ? invalidRequest("The message text is empty.") : null;
    if (data instanceof ThinwireError) refusal ??= data;
    else if (data !== null) request.data = data;
    let target: { contextId: string; turn: Snapshot["turns"][number] } | null = null;
    return this.#job(
      refusal,
      () => {
        this.#noDecisionPending();
        const { contextId, turns } = this.#view.snapshot;
        const turn = turns.find((shown) => shown.id === turnId && !shown.streaming);
        if (contextId === null || !turn) throw turnNotFound(turnId);
        if (turn.role !== "user") throw notAUserTurn();
        target = { contextId, turn };
      },
      (job) => this.#messages.edit(target!.contextId, target!.turn, request, job),
    );
  }

  /**
   * Shows the branch where the exchange of the turn `turnId` is its
   * alternative number `index` (from 0, up to the turn's `siblings` − 1):
   * loads that branch's transcript into the view. Resolves once it is shown.
   *
   * Guarded like `send()` (`context_busy`, `decision_pending`, `disposed`);
   * rejects with `invalid_request` for an index that is not a whole number
   * ≥ 0, `branch_not_found` — without a request when there is no
   * conversation, or the turn is shown and `index` ≥ its `siblings` — or
   * another refusal of the server — then `error` shows it, and `onError`
   * hears of it. The count is the view's: it never exceeds the server's, but
   * an alternative another tab added since the view last loaded the
   * transcript is not in it, and its index is refused until one shows it (a
   * regeneration, an edit or a reload here).
   *
   * It reads no run, so it holds nothing while its answer is on its way: the
   * status stays as it is, and a send, a regeneration, an edit or another
   * switch is taken meanwhile. That job then owns the view: this switch's
   * answer is dropped (the promise resolves), its failure only rejects. The
   * server holds the conversation while it switches, as for a run, so that
   * job shows what it shows at once (a send: its message, status
   * `streaming`) but makes its request once this switch is answered; a
   * switch still waiting for an earlier one then makes none.
   *
   * Refused `context_busy` by the server — a run this client did not see
   * start holds the conversation: another tab's — it rejects with that, shown
   * as any refusal, once the transcript is shown again; and the client
   * follows that run, the error beside it, as for a send refused so.
   *
   * ```tsx
   * <button onClick={() => client.switchBranch(turn.id, turn.siblingIndex - 1)}>‹</button>
   * ```
   */
  switchBranch(turnId: string, index: number): Promise<void> {
    const valid = typeof turnId === "string" && turnId !== "" && Number.isInteger(index) && index >= 0;
    let contextId: string | null = null;
    return this.#exclusive(
      valid ? null : invalidRequest("switchBranch() needs a turn id and a whole number ≥ 0."),
      () => {
        this.#noDecisionPending();
        const { turns } = this.#view.snapshot;
        contextId = this.#view.snapshot.contextId;
        if (contextId === null) throw branchNotFound();
        // The view's count never exceeds the server's (alternatives are never removed): an
        // index past it is one this view never showed. One another tab added since is
        // refused too, until a transcript shows it (see the doc comment).
        const turn = turns.find((shown) => shown.id === turnId);
        if (turn && index >= turn.siblings) throw noSuchAlternative(turn.siblings);
      },
      async (job) => {
        // No run to read: the client is free at once (the status stays as it is), and a job
        // that begins meanwhile — a send, another switch — owns the view from then on.
        if (this.#run === job) this.#run = null;
        const current = () => !job.superseded;
        const signal = job.signal;
        try {
          // The server holds the conversation while it switches: after a switch of ours on its
          // way (unless a job begun meanwhile made this one moot), and before a job begun now.
          await this.#holds.released(signal);
          if (!current()) return;
          await this.#holds.add(this.#transcripts.branch(contextId!, { turnId, index }, signal, current), signal);
          // The server shows that branch now, in its list too (the preview, the turn count).
          this.#listChanged();
        } catch (caught) {
          if (signal.aborted) throw aborted(caught);
          let error = toThinwireError(caught);
          if (!current()) throw error;
          this.#view.fail(error);
          if (error.code === "context_busy" || error.code === "decision_pending") {
            // Another tab's run holds the conversation, or asked a question this client did not
            // know of, as when a send is refused: show it (a run followed), the error kept
            // beside it (see `Messages`).
            const interrupt = await this.#transcripts.refresh(contextId!, signal, current, { keepError: true });
            if (signal.aborted) throw aborted(caught);
            if (error.code === "decision_pending" && error.interruptId === undefined && interrupt) {
              error = withInterruptId(error, interrupt.interruptId);
            }
          }
          this.#failed(error);
          throw error;
        }
      },
    );
  }

  /**
   * Shows the page of exchanges before the first turn shown (`GET
   * …/contexts/{id}?limit={pageSize}&before={turnId}`) ahead of the turns,
   * and `hasEarlier` for what precedes it. Resolves once it is shown, at once
   * when `hasEarlier` is false; a call while one is in flight gets its promise.
   * Allowed while a run streams, which goes on unharmed.
   *
   * The answer is dropped, and the promise resolves, when the conversation
   * shown changed meanwhile (`open()`, `reset()`, another branch). A
   * `turn_not_found` (the history changed on the server: cleared, say)
   * loads the latest page again instead, unless a run is being read, or one
   * began since (the page, read before it, is dropped then). Any
   * other failure rejects with its ThinwireError and changes nothing in the
   * view: no `error`, no status `error`, and no `onError`.
   *
   * ```ts
   * if (client.getSnapshot().hasEarlier) await client.loadEarlier();
   * ```
   */
  loadEarlier(): Promise<void> {
    if (this.#earlier && !this.#earlier.job.signal.aborted) return this.#earlier.promise;
    const { contextId, turns, hasEarlier } = this.#view.snapshot;
    const first = turns[0];
    if (this.#disposed || !hasEarlier || contextId === null || !first) return Promise.resolve();
    const { job, promise } = this.#side((side) => this.#showEarlier(contextId, first.id, side));
    const earlier = {
      job,
      promise: promise.finally(() => {
        if (this.#earlier === earlier) this.#earlier = null;
      }),
    };
    this.#earlier = earlier;
    return earlier.promise;
  }

  /** The page before the turn `before`; a vanished turn shows the latest page instead. */
  async #showEarlier(contextId: string, before: string, job: Job): Promise<void> {
    const signal = job.signal;
    try {
      await this.#transcripts.earlier(contextId, before, signal);
    } catch (caught) {
      if (signal.aborted) return;
      const error = toThinwireError(caught);
      if (error.code !== "turn_not_found") throw error;
      // Not over a run being read, nor over the view of one begun since (and over, maybe).
      await this.#transcripts.refresh(contextId, signal, () => !job.superseded && this.#running() === null);
    }
  }

  /**
   * Answers the pending interrupt (`snapshot.interrupt`) with one of its
   * `options`, or a value matching its `decisionSchema`, and streams the run
   * the decision continues into a new assistant reply, exactly like `send()`.
   * Resolves with that run's result: stop reason `interrupted` again when it
   * asks another question (the new one is then `snapshot.interrupt`).
   *
   * The interrupt leaves the snapshot as soon as the decision is sent. Rejects
   * with `no_pending_interrupt` (no request made), `context_busy`, the
   * server's refusal — `invalid_decision`: the interrupt is pending again and
   * the error shown; `interrupt_answered` / `interrupt_not_found`: it is gone,
   * and the transcript is loaded again — or as `send()` does. When another
   * tab's answer continued a run that still goes on, that transcript names it,
   * and the client follows it as `start()` follows one (status `streaming`,
   * its end to `onFinish`); this promise still rejects with the refusal. The
   * refusal stays shown (`error`) either way, as a `context_busy` of a send's
   * does: beside the run followed, or over what the conversation holds now
   * (status `error`) when that run is over already.
   *
   * ```ts
   * const { interrupt } = client.getSnapshot();
   * if (interrupt?.options?.includes("approve")) await client.decide("approve");
   * ```
   */
  decide(value: unknown): Promise<SendResult> {
    const pending = () => {
      const { interrupt, contextId } = this.#view.snapshot;
      if (!interrupt || contextId === null) {
        throw new ThinwireError("no_pending_interrupt", "No decision is pending.");
      }
      return { interrupt, contextId };
    };
    return this.#job(null, pending, (job) => {
      const { interrupt, contextId } = pending();
      return this.#decisions.answer(contextId, interrupt, value, job);
    });
  }

  /**
   * Asks the server to stop the run being read (a no-op when there is none).
   * The run's stream then ends with `done` and stop reason `stopped`, which is
   * what the pending `send()` resolves with. Resolves once the server took the
   * request; a stop asked before the server announced the run is sent as soon
   * as it does (and resolves at once if the run's job ends first). When the
   * server answers that no run is going on (over HTTP), the stream being read
   * will bring nothing more: the client ends it and attaches again, and the
   * send settles as the server recorded the run.
   *
   * While a decision is pending it ends the waiting run instead: the
   * interrupt is cleared, the reply ends as `stopped`, and the transcript is
   * loaded again — dropped if a send taken meanwhile shows its run. The
   * server holds the conversation while it ends the run: a `decide()` taken
   * meanwhile (the question is shown until the stop is answered) makes its
   * request once it is, and finds the question gone (`interrupt_not_found`).
   *
   * Rejects when the stop request fails: `network_error` (the server cannot
   * be reached), the server's refusal (over HTTP; a WebSocket does not answer
   * a stop), or `aborted` when `reset()`, `open()` or `dispose()` cancels the
   * stop of a waiting run. Nothing changes then — no `error`, no `onError` —
   * and the run goes on, so a UI catches it: `stop().catch(…)`.
   */
  async stop(): Promise<void> {
    if (this.#disposed) return;
    const job = this.#running();
    if (job) return job.stop();
    const { interrupt, contextId } = this.#view.snapshot;
    if (!interrupt || contextId === null) return;
    // The view is this stop's until a job begins (a send, once the interrupt is cleared).
    const { promise } = this.#side((job) =>
      this.#decisions.endWaitingRun(contextId, job.signal, () => !job.superseded && this.#running() === null),
    );
    await promise;
  }

  /**
   * Dismisses the error shown (`snapshot.error` becomes null); a view in
   * status `error` goes back to `idle`. A run in progress is not touched.
   * When the conversation shown was never loaded (its transcript failed to
   * load, and no transcript of it was shown since), it is loaded again
   * instead: status `hydrating`, as `start()` does.
   *
   * ```ts
   * if (client.getSnapshot().status === "error") client.clearError();
   * ```
   */
  clearError(): void {
    if (this.#disposed) return;
    const { error, status, contextId } = this.#view.snapshot;
    if (error === null && status !== "error") return;
    if (status === "error" && contextId !== null && this.#transcripts.unloaded(contextId) && !this.#busy()) {
      // A blank view under an id that has a history: show the history, not a new-looking chat.
      void this.#hydrate(contextId);
      return;
    }
    this.#view.show({ error: null, status: status === "error" ? "idle" : status });
  }

  /** Cancels any in-flight work and starts a new, empty conversation. */
  reset(): void {
    if (this.#disposed) return;
    this.#abortAll();
    this.#view.clear(false);
    this.#options.onContext?.(null);
  }

  /**
   * Cancels in-flight work and drops every listener; closes the transport if
   * the client created it. The client is unusable afterwards.
   */
  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    this.#abortAll();
    this.#view.close();
    this.#notifier.close();
    this.#forgetListeners.clear();
    this.#listListeners.clear();
    this.#tabs?.close();
    if (this.#ownsTransport) this.#transport.close?.();
  }

  /**
   * Does `work` as the job in flight once the guards pass: not disposed, no
   * `refusal`, nothing else running, the hydration over, then `guard` (which
   * throws a refusal). It is `#run` until it ends, or until its run does.
   */
  async #exclusive<T>(refusal: ThinwireError | null, guard: () => void, work: (job: Job) => Promise<T>): Promise<T> {
    if (this.#disposed) throw disposed();
    if (refusal) throw refusal;
    if (this.#running()) throw busy();
    this.#joinTabs();
    const job = new Job();
    this.#run = job;
    this.#jobs.add(job);
    try {
      if (this.#hydration) await this.#hydration.promise;
      if (job.signal.aborted) throw aborted();
      if (this.#following) throw busy();
      guard();
      this.#supersedeOthers(job);
      return await work(job);
    } finally {
      if (this.#run === job) this.#run = null;
      this.#jobs.delete(job);
      job.finish();
    }
  }

  /**
   * Does `work` as a side job, outside the run being read and beside it: ending
   * a waiting run, an earlier page. `reset()` cancels it, and a job that begins
   * supersedes it — its view is then the new job's.
   */
  #side(work: (job: Job) => Promise<void>): { job: Job; promise: Promise<void> } {
    const job = new Job();
    this.#jobs.add(job);
    const promise = work(job).finally(() => {
      this.#jobs.delete(job);
      job.finish();
    });
    return { job, promise };
  }

  /** A job that reads a run (a send, a decision, a regeneration, an edit); how it ends is reported. */
  #job(refusal: ThinwireError | null, guard: () => void, work: (job: Job) => Promise<SendResult>): Promise<SendResult> {
    return this.#exclusive(refusal, guard, (job) => this.#reported(work(job)));
  }

  /** Checked after the hydration, which may have found a question pending. */
  #noDecisionPending(): void {
    const pending = this.#view.snapshot.interrupt;
    if (pending) throw decisionPending(pending.interruptId);
  }

  /** Tells `onFinish` and `onError` how a run the client read ended; its outcome passes through. */
  async #reported(run: Promise<SendResult>): Promise<SendResult> {
    let result: SendResult;
    try {
      result = await run;
    } catch (caught) {
      this.#failed(caught);
      throw caught;
    }
    const { error } = this.#view.snapshot;
    if (result.stopReason === "error" && error) this.#callback(this.#options.onError, error);
    this.#callback(this.#options.onFinish, result);
    return result;
  }

  /** A failed request or run, for `onError`; a cancelled one is no failure. */
  #failed(caught: unknown): void {
    const error = toThinwireError(caught);
    if (error.code !== "aborted" && !this.#disposed) this.#callback(this.#options.onError, error);
  }

  /** Calls an app callback; what it throws is reported on its own, never breaking the run. */
  #callback<T>(callback: ((value: T) => void) | undefined, value: T): void {
    try {
      callback?.(value);
    } catch (error) {
      queueMicrotask(() => {
        throw error;
      });
    }
  }

  /** Follows a run `start()` found in progress, as `#following` until it ends. */
  #resume(contextId: string, active: ActiveRun): void {
    const job = new Job();
    job.runStarted(() => this.#transport.stop({ ...this.#target(), contextId }));
    this.#following = job;
    this.#jobs.add(job);
    this.#supersedeOthers(job);
    void this.#reported(this.#reader.resume(job, contextId, active))
      .catch(() => undefined) // shown in the view, and reported
      .finally(() => {
        if (this.#following === job) this.#following = null;
        this.#jobs.delete(job);
        job.finish();
      });
  }

  /**
   * Follows a run a reload of the transcript found in progress — another tab's,
   * or the one its answer to the question shown continued — unless something
   * else is in flight (it owns the view). Says whether it did.
   */
  #followFound(contextId: string, active: ActiveRun): boolean {
    if (this.#disposed || this.#busy()) return false;
    this.#resume(contextId, active);
    return true;
  }

  /** `job` begins: what a job whose run ended still shows (a refresh) would undo its view. */
  #supersedeOthers(job: Job): void {
    for (const other of this.#jobs) if (other !== job) other.supersede();
  }

  /** The job whose run is being read: the run found on resume, else the send or decision in flight. */
  #running(): Job | null {
    return this.#following ?? this.#run;
  }

  /** A job or a hydration is in flight. */
  #busy(): boolean {
    return this.#running() !== null || this.#hydration !== null;
  }

  /** Announces a change of the view: the new id to `onContext`, the new snapshot to subscribers. */
  #announce(previous: ReducerState, next: ReducerState, { announceContext, batch, forgets }: Required<CommitOptions>): void {
    const contextId = next.snapshot.contextId;
    const gone = previous.snapshot.contextId;
    if (announceContext && contextId !== gone) this.#options.onContext?.(contextId);
    if (next.snapshot === previous.snapshot) return;
    // Before the subscribers: a list that shows the conversation drops it as the view does.
    if (forgets && gone !== null) for (const listener of [...this.#forgetListeners]) this.#callback(listener, gone);
    // The other tabs hear of the runs this one starts, once the server announced them.
    const { runId } = next;
    const own = this.#following === null && contextId !== null && runId !== null ? { contextId, runId } : null;
    if (own && runId !== previous.runId) this.#tabs?.tell({ run: "started", ...own });
    if (readsRun(previous.snapshot.status) && !readsRun(next.snapshot.status)) {
      if (own) this.#tabs?.tell({ run: "ended", ...own });
      // The run is over (idle or error): the client is free before anyone hears of it, so a
      // send from a listener or from `onFinish` is taken. The job only finishes up: a refresh
      // that yields to the next job, then its callbacks.
      this.#run = null;
      this.#following = null;
    }
    // A status change (the end of a run, above all) is never deferred.
    this.#notifier.changed(batch && next.snapshot.status === previous.snapshot.status);
  }

  /** Joins the other tabs on `tabChannel`, if given: once, when the client is first used. */
  #joinTabs(): void {
    const name = this.#options.tabChannel;
    if (this.#tabs === null && !this.#disposed && name) this.#tabs = new Tabs(name, (news) => this.#heard(news));
  }

  /**
   * What another tab told. The conversations listed changed — unless by a run
   * this client read, whose end loads the list anyway. A run of the
   * conversation shown that this client did not read, begun or ended: the
   * transcript is loaded again, as a reload would, and a run in progress there
   * followed — unless something is in flight here, which then owns the view.
   */
  #heard(news: TabNews): void {
    if (this.#disposed) return;
    if (!("run" in news)) return this.#listChanged(false);
    const read = news.runId === this.#view.state.runId;
    if (news.run === "ended" && !read) this.#listChanged(false);
    if (read || news.contextId !== this.#view.snapshot.contextId) return;
    if (this.#busy() || this.#catchingUp !== null) return;
    const contextId = news.contextId;
    const { job, promise } = this.#side((side) =>
      this.#transcripts.refresh(contextId, side.signal, () => !side.superseded && !this.#busy()).then(
        () => undefined,
        () => undefined, // best effort, as a reload: the next news, or send, tries again
      ),
    );
    this.#catchingUp = job;
    void promise.finally(() => {
      if (this.#catchingUp === job) this.#catchingUp = null;
    });
  }

  /** The list changed: this client's list hears of it, and the other tabs unless they told it. */
  #listChanged(tell = true): void {
    for (const listener of [...this.#listListeners]) this.#callback(listener, undefined);
    if (tell) this.#tabs?.tell({ list: "changed" });
  }

  #abortAll(): void {
    for (const job of this.#jobs) job.abort();
    this.#jobs.clear();
    this.#run = null;
    this.#following = null;
    this.#hydration?.controller.abort();
  }

  #target(): TransportTarget {
    return requestTarget(this.#options);
  }

  /** Shows `title` when the conversation shown is `contextId`: a rename made elsewhere (a `ConversationList`). */
  #showTitle(contextId: string, title: string | null): void {
    const snapshot = this.#view.snapshot;
    if (this.#disposed || snapshot.contextId !== contextId || snapshot.title === title) return;
    this.#view.show({ title });
  }

  /**
   * What shows the title a page of the list asked for now gives, once it is
   * loaded — if the page is no older than the title shown by then. The server
   * records a title before the client can learn it, but for a `title` frame
   * (recorded when its run ends). So the page's title is taken when, as the
   * page was asked for, the client read no run, and since then it learned
   * nothing of the title: no title changed (a frame, a rename, a transcript),
   * no transcript was shown, and the conversation is the same. Otherwise it
   * is dropped: the list's next page brings it.
   */
  #listedTitle(): (contextId: string, title: string | null) => void {
    if (readsRun(this.#view.snapshot.status)) return () => undefined;
    const learned = () => [this.#view.snapshot.contextId, this.#view.titleChanges, this.#transcripts.shown];
    const asked = learned();
    return (listed, title) => {
      if (learned().every((value, index) => value === asked[index])) this.#showTitle(listed, title);
    };
  }

  static {
    titleShower = (client, contextId, title) => client.#showTitle(contextId, title);
    titleLister = (client) => client.#listedTitle();
    listFollower = (client, listener) => {
      if (client.#disposed) return () => undefined;
      client.#joinTabs(); // a list that follows the client uses it
      client.#listListeners.add(listener);
      return () => client.#listListeners.delete(listener);
    };
    listTeller = (client) => client.#tabs?.tell({ list: "changed" });
    forgetFollower = (client, listener) => {
      if (client.#disposed) return () => undefined;
      client.#forgetListeners.add(listener);
      return () => client.#forgetListeners.delete(listener);
    };
  }
}


/** A run is being read: streaming, or attaching again after a break. */
function readsRun(status: Status): boolean {
  return status === "streaming" || status === "reconnecting";
}

/** Exchanges per page of a transcript, unless `pageSize` says otherwise. */
const DEFAULT_PAGE_SIZE = 50;

/** The transport a client creates (and closes) itself. */
function createTransport(
  kind: "sse" | "websocket",
  requests: { fetch: typeof fetch; credentials: CredentialsMode },
  webSocket: typeof WebSocket | undefined,
): Transport {
  if (kind === "sse") return new SseTransport(requests);
  if (kind === "websocket") return new WebSocketTransport({ ...requests, WebSocket: webSocket });
  throw new TypeError(`Unknown transport ${JSON.stringify(kind)}: use "sse", "websocket" or a Transport.`);
}
