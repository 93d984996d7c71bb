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
 * Every run the client reads — a send's, a decision's, the one `start()`
 * found in progress — ends in `onFinish` (its result) or `onError` (its
 * failure), and a run that failed on the server in both. An error is shown
 * until `clearError()` or the next send.
 *
 * This file is the store, its commands and the lifecycle of their jobs; the
 * work lives beside it, each job in one place: `view.ts` (the state and its
 * changes), `run-reader.ts` (frames into the view, reconnect),
 * `transcript-loader.ts` (hydrate, refresh, settle), `decisions.ts`.
 */
import { Decisions } from "./decisions.js";
import {
  aborted,
  busy,
  decisionPending,
  disposed,
  ThinwireError,
  toThinwireError,
  withInterruptId,
} from "./errors.js";
import { PROTOCOL_HEADER, PROTOCOL_VERSION, type RunRequest } from "./generated/wire.js";
import { Job } from "./job.js";
import { newMessageId } from "./message-id.js";
import { Notifier, type Schedule } from "./notifier.js";
import { reconnectLimits, type ReconnectOptions } from "./reconnect.js";
import type { ReducerState } from "./reduce.js";
import { RunReader } from "./run-reader.js";
import { requestData, type SendOptions } from "./send-options.js";
import type { SendResult } from "./send-result.js";
import type { AgentErrorInfo, Snapshot } from "./snapshot.js";
import { SseTransport } from "./sse-transport.js";
import { type ActiveRun, TranscriptLoader } from "./transcript-loader.js";
import type { Transport, TransportTarget } from "./transport.js";
import { type CommitOptions, View } from "./view.js";
import { WebSocketTransport } from "./websocket-transport.js";

export type { SendOptions } from "./send-options.js";
export type { SendResult } from "./send-result.js";

export interface AgentClientOptions {
  /** The agent's name, as mounted on the server. */
  agent: string;
  /** Prefix of the thinwire routes, e.g. `"/api"`; defaults to the page origin. */
  baseUrl?: string;
  /** Resume this conversation: `start()` loads its transcript and follows a run in progress. */
  contextId?: string | null;
  /**
   * How runs are streamed: `"sse"` (the default, over `fetch`), `"websocket"`
   * (one socket at `{baseUrl}/agents/{agent}/ws`), or a Transport of your own.
   * A transport the client creates is closed by `dispose()`; one you pass in
   * is yours to close.
   */
  transport?: "sse" | "websocket" | Transport;
  /** Used for the transcript, by the SSE transport the client creates, and for WebSocket tickets. */
  fetch?: typeof fetch;
  /**
   * fetch's `credentials` for every request the client makes (runs, attaches,
   * stops, decisions, transcripts, WebSocket tickets) through the transport it
   * creates: `"same-origin"` (the default), or `"include"` to send cookies to
   * a server of another origin (which must allow it with CORS).
   */
  credentials?: RequestCredentials;
  /**
   * Extra request headers (authentication, say); read at request time. Over a
   * WebSocket, which a browser cannot give headers, they fetch a ticket
   * (`POST …/tickets`) that opens the socket.
   */
  headers?: Record<string, string>;
  /** Called whenever the conversation id changes: minted by the server, forgotten, reset. */
  onContext?: (contextId: string | null) => void;
  /**
   * Called with the result of every run the client reads to its end — a
   * send's, a decision's, a run `start()` found in progress — whatever its
   * stop reason (`end`, `stopped`, `interrupted`, `error`), before `send()` or
   * `decide()` resolves.
   */
  onFinish?: (result: SendResult) => void;
  /**
   * Called when a run or its request failed: with the ThinwireError a
   * `send()` or `decide()` rejects with, or a resumed run or the transcript
   * `start()` loads failed with; with the run's error (`snapshot.error`, e.g.
   * `agent_error`) when a run ended with stop reason `error` (then `onFinish`
   * follows). Not for `aborted` (a reset or dispose), nor for a refusal made
   * before any request (empty text, a send while another runs).
   */
  onError?: (error: ThinwireError | AgentErrorInfo) => void;
  /** How a broken stream is reattached, and a send whose response never started repeated. */
  reconnect?: ReconnectOptions;
  /**
   * Batches the notifications of streaming frames: called with a `flush` when
   * a frame changed the view and no flush is scheduled yet; `flush` notifies
   * once for all changes made since. Without it every change notifies at once.
   * Other changes (a send, a reset, hydration) and any change of `status` (so
   * the end of a run) always notify at once, carrying what was batched.
   *
   * ```ts
   * new AgentClient({ agent: "demo", schedule: (flush) => requestAnimationFrame(flush) });
   * ```
   */
  schedule?: Schedule;
  /**
   * With `schedule`: milliseconds a batched notification keeps from the one
   * before it (immediate ones included); a flush that comes sooner waits for
   * the next `schedule`. `useAgent` sets it so a view commits at most 60 times
   * a second, whatever the display's refresh rate.
   */
  minNotifyInterval?: number;
}

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
  /** The send or decision in flight. */
  #run: Job | null = null;
  /** The run found in progress by `start()`. */
  #following: Job | null = null;
  #hydration: { controller: AbortController; promise: Promise<void> } | null = null;
  /** Requests outside any job (ending a waiting run), cancelled by `reset()`. */
  readonly #sideRequests = new Set<AbortController>();
  #started = false;
  #disposed = false;

  constructor(options: AgentClientOptions) {
    if (!options.agent) throw new TypeError("AgentClient needs an agent name.");
    this.#options = options;
    const fetchImpl: typeof fetch = options.fetch ?? ((input, init) => globalThis.fetch(input, init));
    this.#notifier = new Notifier(
      options.schedule,
      options.minNotifyInterval === undefined ? {} : { minInterval: options.minNotifyInterval },
    );
    this.#view = new View(options.contextId ?? null, (previous, next, commit) => this.#announce(previous, next, commit));
    const option = options.transport ?? "sse";
    this.#ownsTransport = typeof option === "string";
    const credentials = options.credentials ?? "same-origin";
    this.#transport = typeof option === "string" ? createTransport(option, fetchImpl, credentials) : option;
    const target = () => this.#target();
    const view = this.#view;
    this.#transcripts = new TranscriptLoader({ fetch: fetchImpl, credentials }, target, view);
    this.#reader = new RunReader({
      transport: this.#transport,
      target,
      view,
      transcripts: this.#transcripts,
      reconnect: reconnectLimits(options.reconnect),
    });
    this.#decisions = new Decisions({
      transport: this.#transport,
      target,
      view,
      reader: this.#reader,
      transcripts: this.#transcripts,
    });
  }

  /** Registers a listener for snapshot changes; returns the unsubscribe function. */
  subscribe = (listener: () => void): (() => void) => this.#notifier.subscribe(listener);

  /** The current view state: the same object until something changes. Always the latest, even while a notification is batched. */
  getSnapshot = (): Snapshot => this.#view.snapshot;

  /**
   * Loads the transcript of the conversation the client was created with, and
   * follows the run in progress if there is one (status `streaming` until it
   * ends). Idempotent; resolves once the transcript is shown, never rejects
   * (failures land in the snapshot, and in `onError`). An id the server does
   * not know (`context_not_found`) is forgotten quietly.
   */
  start(): Promise<void> {
    if (this.#hydration) return this.#hydration.promise;
    const contextId = this.#view.snapshot.contextId;
    if (this.#started || this.#disposed || this.#run || contextId === null) {
      this.#started = true;
      return Promise.resolve();
    }
    this.#started = true;
    const controller = new AbortController();
    this.#view.show({ status: "hydrating", error: null });
    const hydration = {
      controller,
      promise: this.#transcripts.hydrate(contextId, controller.signal).then(
        (active) => {
          if (active && !controller.signal.aborted) this.#resume(contextId, active);
        },
        (error: unknown) => this.#failed(error),
      ),
    };
    // Once over, it is no request of ours any more: nothing may abort it.
    void hydration.promise.finally(() => {
      if (this.#hydration === hydration) this.#hydration = null;
    });
    this.#hydration = hydration;
    return hydration.promise;
  }

  /**
   * Sends a message and streams the reply into the snapshot, reconnecting when
   * the stream breaks. Resolves with the final reply (stop reason `stopped`
   * after `stop()`, `interrupted` when the run asks a person: the question is
   * then `snapshot.interrupt`); rejects with a ThinwireError (`invalid_request`
   * for empty text, `context_busy` while another run is being read,
   * `decision_pending` with its `interruptId` while a decision is pending,
   * the server's error code, `network_error` or `stream_interrupted` once
   * reconnecting gave up, `aborted`).
   *
   * Every send carries a fresh `messageId`. When it fails before any frame of
   * its run arrived in a way that leaves open whether the server took it (the
   * connection dropped, a 5xx, a retryable error other than `context_busy`,
   * `rate_limited` or `too_many_streams`), it is sent again with the same id,
   * text and `data`, status `reconnecting`, with the `reconnect` backoff and
   * limit: the server streams the run the first try started, or starts it now.
   *
   * A send is allowed after an error (status `error`), and clears it.
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
      () => {
        // Checked after the hydration, which may have found a question pending.
        const pending = this.#view.snapshot.interrupt;
        if (pending) throw decisionPending(pending.interruptId);
      },
      (job) => this.#sendMessage(body, job),
    );
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
   * and the transcript is loaded again — or as `send()` does.
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
   * as it does.
   *
   * While a decision is pending it ends the waiting run instead: the
   * interrupt is cleared, the reply ends as `stopped`, and the transcript is
   * loaded again.
   */
  async stop(): Promise<void> {
    if (this.#disposed) return;
    const job = this.#running();
    if (job) return job.stop();
    const { interrupt, contextId } = this.#view.snapshot;
    if (!interrupt || contextId === null) return;
    const controller = new AbortController();
    this.#sideRequests.add(controller);
    try {
      await this.#decisions.endWaitingRun(contextId, controller.signal, () => this.#running() === null);
    } finally {
      this.#sideRequests.delete(controller);
    }
  }

  /**
   * Dismisses the error shown (`snapshot.error` becomes null); a view in
   * status `error` goes back to `idle`. A run in progress is not touched.
   *
   * ```ts
   * if (client.getSnapshot().status === "error") client.clearError();
   * ```
   */
  clearError(): void {
    if (this.#disposed) return;
    const { error, status } = this.#view.snapshot;
    if (error === null && status !== "error") return;
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
    if (this.#ownsTransport) this.#transport.close?.();
  }

  /**
   * Starts a job (a send or a decision) once the guards pass: not disposed, no
   * `refusal`, nothing else running, the hydration over, then `guard` (which
   * throws a refusal). It is `#run` until it ends; how it ends is reported.
   */
  async #job(
    refusal: ThinwireError | null,
    guard: () => void,
    work: (job: Job) => Promise<SendResult>,
  ): Promise<SendResult> {
    if (this.#disposed) throw disposed();
    if (refusal) throw refusal;
    if (this.#running()) throw busy();
    const job = new Job();
    this.#run = job;
    try {
      if (this.#hydration) await this.#hydration.promise;
      if (job.signal.aborted) throw aborted();
      if (this.#following) throw busy();
      guard();
      return await this.#reported(work(job));
    } finally {
      if (this.#run === job) this.#run = null;
      job.finish();
    }
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

  /** Shows the message as a new user turn and streams the run it starts into a fresh reply. */
  async #sendMessage(request: RunRequest, job: Job): Promise<SendResult> {
    const view = this.#view;
    const signal = job.signal;
    const before = view.snapshot;
    const user = view.turn("user", request.message.text, false);
    const reply = view.openReply([...before.turns, user], { runId: null });
    const body: RunRequest = { ...request };
    if (before.contextId !== null) body.contextId = before.contextId;
    // One key for every try of this message: a repeat after a cut response is then safe.
    const messageId = newMessageId();
    if (messageId !== null) body.messageId = messageId;
    try {
      const frames = () => this.#transport.run({ ...this.#target(), body, signal });
      return await this.#reader.follow(frames, job, { repeatable: messageId !== null });
    } catch (caught) {
      if (signal.aborted) throw aborted(caught);
      let error = toThinwireError(caught);
      // A request that produced no frame leaves no trace but the error.
      view.failRun(error, job.runKnown ? null : user.id, reply.id);
      if (error.code === "decision_pending" && before.contextId !== null) {
        // The conversation waits for a decision this client did not know of (another tab, say): show it.
        const interrupt = await this.#transcripts.refresh(before.contextId, signal);
        if (signal.aborted) throw aborted(caught);
        if (error.interruptId === undefined && interrupt) error = withInterruptId(error, interrupt.interruptId);
      }
      throw error;
    }
  }

  /** Follows a run `start()` found in progress, as `#following` until it ends. */
  #resume(contextId: string, active: ActiveRun): void {
    const job = new Job();
    job.runStarted(() => this.#transport.stop({ ...this.#target(), contextId }));
    this.#following = job;
    void this.#reported(this.#reader.resume(job, contextId, active))
      .catch(() => undefined) // shown in the view, and reported
      .finally(() => {
        if (this.#following === job) this.#following = null;
        job.finish();
      });
  }

  /** The job being read: the run found on resume, else the send or decision in flight. */
  #running(): Job | null {
    return this.#following ?? this.#run;
  }

  /** Announces a change of the view: the new id to `onContext`, the new snapshot to subscribers. */
  #announce(previous: ReducerState, next: ReducerState, { announceContext, batch }: Required<CommitOptions>): void {
    const contextId = next.snapshot.contextId;
    if (announceContext && contextId !== previous.snapshot.contextId) this.#options.onContext?.(contextId);
    if (next.snapshot === previous.snapshot) return;
    // A status change (the end of a run, above all) is never deferred.
    this.#notifier.changed(batch && next.snapshot.status === previous.snapshot.status);
  }

  #abortAll(): void {
    this.#run?.abort();
    this.#following?.abort();
    this.#run = null;
    this.#following = null;
    this.#hydration?.controller.abort();
    for (const controller of this.#sideRequests) controller.abort();
    this.#sideRequests.clear();
  }

  #target(): TransportTarget {
    return {
      baseUrl: (this.#options.baseUrl ?? "").replace(/\/+$/, ""),
      agent: this.#options.agent,
      headers: { ...this.#options.headers, [PROTOCOL_HEADER]: PROTOCOL_VERSION },
    };
  }
}

/** The transport a client creates (and closes) itself. */
function createTransport(kind: "sse" | "websocket", fetchImpl: typeof fetch, credentials: RequestCredentials): Transport {
  if (kind === "sse") return new SseTransport({ fetch: fetchImpl, credentials });
  if (kind === "websocket") return new WebSocketTransport({ fetch: fetchImpl, credentials });
  throw new TypeError(`Unknown transport ${JSON.stringify(kind)}: use "sse", "websocket" or a Transport.`);
}
