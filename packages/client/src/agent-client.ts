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
 * (the attach has nothing to send), the transcript has its reply.
 *
 * A run may stop to ask a person (an `interrupt` frame, then `done` with stop
 * reason `interrupted`); the question is `snapshot.interrupt` until `decide()`
 * answers it, which streams the continued run (a new run of the same context)
 * exactly like a send, or `stop()` ends the waiting run. Meanwhile nothing
 * else can be sent: the server would refuse it with `decision_pending`.
 *
 * This file is the store and its commands; the work behind them lives beside
 * it, reached through `ClientCore`: `run-stream.ts` (reading a run, reconnect),
 * `transcript.ts` (hydration, refresh), `decisions.ts` (answering interrupts).
 */
import { type ClientCore, type Job, newJob, type SendResult, settleStops } from "./client-core.js";
import { answer, endWaitingRun } from "./decisions.js";
import { aborted, busy, decisionPending, disposed, ThinwireError } from "./errors.js";
import { type InterruptRequest, PROTOCOL_HEADER, PROTOCOL_VERSION } from "./generated/wire.js";
import { Notifier, type Schedule } from "./notifier.js";
import { reconnectLimits, type ReconnectOptions } from "./reconnect.js";
import { initialReducerState, type ReducerState } from "./reduce.js";
import { followActiveRun, streamMessage } from "./run-stream.js";
import { emptySnapshot, type Snapshot, type Turn } from "./snapshot.js";
import { SseTransport } from "./sse-transport.js";
import { hydrate } from "./transcript.js";
import type { Transport, TransportTarget } from "./transport.js";

export type { SendResult } from "./client-core.js";

export interface AgentClientOptions {
  /** The agent's name, as mounted on the server. */
  agent: string;
  /** Prefix of the thinwire routes, e.g. `"/api"`; defaults to the page origin. */
  baseUrl?: string;
  /** Resume this conversation: `start()` loads its transcript and follows a run in progress. */
  contextId?: string | null;
  /** Defaults to an `SseTransport` over `fetch`. */
  transport?: Transport;
  /** Used for the transcript, and by the default transport. */
  fetch?: typeof fetch;
  /** Extra request headers (authentication, say). */
  headers?: Record<string, string>;
  /** Called whenever the conversation id changes: minted by the server, forgotten, reset. */
  onContext?: (contextId: string | null) => void;
  /** How a broken stream is retried. */
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
  /** What the run, transcript and decision modules see of this client. */
  readonly #core: ClientCore;
  #state: ReducerState;
  /** The send in flight. */
  #run: Job | null = null;
  /** The run found in progress by `start()`. */
  #following: Job | null = null;
  #hydration: { controller: AbortController; promise: Promise<void> } | null = null;
  /** Requests outside any run (ending a waiting run), cancelled by `reset()`. */
  readonly #sideRequests = new Set<AbortController>();
  #started = false;
  #disposed = false;
  #turnCount = 0;

  constructor(options: AgentClientOptions) {
    if (!options.agent) throw new TypeError("AgentClient needs an agent name.");
    this.#options = options;
    const fetchImpl: typeof fetch = options.fetch ?? ((input, init) => globalThis.fetch(input, init));
    this.#notifier = new Notifier(
      options.schedule,
      options.minNotifyInterval === undefined ? {} : { minInterval: options.minNotifyInterval },
    );
    this.#state = initialReducerState(emptySnapshot(options.contextId ?? null));
    this.#core = {
      transport: options.transport ?? new SseTransport({ fetch: fetchImpl }),
      fetch: fetchImpl,
      reconnect: reconnectLimits(options.reconnect),
      state: () => this.#state,
      commit: (next, announceContext, batch) => this.#commit(next, announceContext, batch),
      running: () => this.#following ?? this.#run,
      turn: (role, text, streaming, toolCalls = [], stopReason = null) => {
        this.#turnCount += 1;
        return { id: `${role}-${this.#turnCount}`, role, text, toolCalls, streaming, stopReason };
      },
      target: () => this.#target(),
      headers: () => this.#headers(),
    };
  }

  /** Registers a listener for snapshot changes; returns the unsubscribe function. */
  subscribe = (listener: () => void): (() => void) => this.#notifier.subscribe(listener);

  /** The current view state: the same object until something changes. Always the latest, even while a notification is batched. */
  getSnapshot = (): Snapshot => this.#state.snapshot;

  /**
   * Loads the transcript of the conversation the client was created with, and
   * follows the run in progress if there is one (status `streaming` until it
   * ends). Idempotent; resolves once the transcript is shown, never rejects
   * (failures land in the snapshot). An id the server does not know
   * (`context_not_found`) is forgotten quietly.
   */
  start(): Promise<void> {
    if (this.#hydration) return this.#hydration.promise;
    const contextId = this.#state.snapshot.contextId;
    if (this.#started || this.#disposed || this.#run || contextId === null) {
      this.#started = true;
      return Promise.resolve();
    }
    this.#started = true;
    const controller = new AbortController();
    this.#commit({
      ...this.#state,
      snapshot: { ...this.#state.snapshot, status: "hydrating", error: null },
    });
    const promise = hydrate(this.#core, contextId, controller.signal, (runId, turns, interrupt) =>
      this.#resume(contextId, runId, turns, interrupt),
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
   * reconnecting gave up, `aborted`).
   */
  async send(text: string): Promise<SendResult> {
    if (this.#disposed) throw disposed();
    if (typeof text !== "string" || text.trim() === "") {
      throw new ThinwireError("invalid_request", "The message text is empty.");
    }
    if (this.#run || this.#following) throw busy();
    const job = newJob();
    this.#run = job;
    try {
      if (this.#hydration) await this.#hydration.promise;
      if (job.controller.signal.aborted) throw aborted();
      if (this.#following) throw busy();
      // Checked after the hydration, which may have found a question pending.
      const pending = this.#state.snapshot.interrupt;
      if (pending) throw decisionPending(pending.interruptId);
      return await streamMessage(this.#core, text, job);
    } finally {
      if (this.#run === job) this.#run = null;
      settleStops(job);
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
   * and the transcript is loaded again — or as `send()` does.
   *
   * ```ts
   * const { interrupt } = client.getSnapshot();
   * if (interrupt?.options?.includes("approve")) await client.decide("approve");
   * ```
   */
  async decide(value: unknown): Promise<SendResult> {
    if (this.#disposed) throw disposed();
    if (this.#run || this.#following) throw busy();
    const job = newJob();
    this.#run = job;
    try {
      if (this.#hydration) await this.#hydration.promise;
      if (job.controller.signal.aborted) throw aborted();
      if (this.#following) throw busy();
      const { interrupt, contextId } = this.#state.snapshot;
      if (!interrupt || contextId === null) {
        throw new ThinwireError("no_pending_interrupt", "No decision is pending.");
      }
      return await answer(this.#core, contextId, interrupt, value, job);
    } finally {
      if (this.#run === job) this.#run = null;
      settleStops(job);
    }
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
    const job = this.#following ?? this.#run;
    const contextId = this.#state.snapshot.contextId;
    if (!job) {
      if (this.#state.snapshot.interrupt && contextId !== null) {
        await endWaitingRun(this.#core, contextId, this.#sideRequests);
      }
      return;
    }
    if (!job.runKnown || contextId === null) {
      await new Promise<void>((resolve, reject) => job.stops.push({ resolve, reject }));
      return;
    }
    await this.#core.transport.stop({ ...this.#target(), contextId });
  }

  /** Cancels any in-flight work and starts a new, empty conversation. */
  reset(): void {
    if (this.#disposed) return;
    this.#abortAll();
    this.#commit(initialReducerState(emptySnapshot(null)), false);
    this.#options.onContext?.(null);
  }

  /** Cancels in-flight work and drops every listener. The client is unusable afterwards. */
  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    this.#abortAll();
    this.#notifier.close();
  }

  /** Follows a run `start()` found in progress, as `#following` until it ends. */
  #resume(contextId: string, runId: string, turns: Turn[], interrupt: InterruptRequest | null): void {
    const job = newJob();
    job.runKnown = true;
    this.#following = job;
    void followActiveRun(this.#core, job, contextId, runId, turns, interrupt).finally(() => {
      if (this.#following === job) this.#following = null;
      settleStops(job);
    });
  }

  #commit(next: ReducerState, announceContext = true, batch = false): void {
    const previous = this.#state;
    if (next === previous || this.#disposed) return;
    this.#state = next;
    const contextId = next.snapshot.contextId;
    if (announceContext && contextId !== previous.snapshot.contextId) this.#options.onContext?.(contextId);
    if (next.snapshot === previous.snapshot) return;
    // A status change (the end of a run, above all) is never deferred.
    this.#notifier.changed(batch && next.snapshot.status === previous.snapshot.status);
  }

  #abortAll(): void {
    for (const job of [this.#run, this.#following]) {
      if (!job) continue;
      job.controller.abort();
      settleStops(job);
    }
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
      headers: this.#headers(),
    };
  }

  #headers(): Record<string, string> {
    return { ...this.#options.headers, [PROTOCOL_HEADER]: PROTOCOL_VERSION };
  }
}
