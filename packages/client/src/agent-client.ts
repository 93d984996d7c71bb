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
 */
import { ThinwireError, toThinwireError } from "./errors.js";
import {
  type DoneFrame,
  type Frame,
  type InterruptRequest,
  PROTOCOL_HEADER,
  PROTOCOL_VERSION,
  type RunRequest,
  type StopReason,
  type Transcript,
  type TranscriptTurn,
} from "./generated/wire.js";
import { fetchTranscript, publicTurns } from "./http.js";
import { publicInterrupt } from "./interrupt.js";
import { Notifier, type Schedule } from "./notifier.js";
import { backoffDelay, isReconnectable, reconnectLimits, type ReconnectOptions } from "./reconnect.js";
import { initialReducerState, reduceFrame, type ReducerState } from "./reduce.js";
import { emptySnapshot, type AgentErrorInfo, type Snapshot, type Status, type Turn } from "./snapshot.js";
import { SseTransport } from "./sse-transport.js";
import { agentUrl, type Transport, type TransportTarget } from "./transport.js";

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
}

export interface SendResult {
  text: string;
  toolCalls: string[];
  contextId: string;
  runId: string;
  stopReason: StopReason;
}

/** A run the client is reading: its own send, or one it found running on resume. */
interface Job {
  readonly controller: AbortController;
  /** The server has announced the run, so a stop can name it. */
  runKnown: boolean;
  /** `stop()` calls made before the run was known. */
  stops: Array<{ resolve: () => void; reject: (error: unknown) => void }>;
}

interface ReadOutcome {
  done: DoneFrame | null;
  /** Frames the transport yielded, duplicates included. */
  frames: number;
  /** Some frame changed the view. */
  progress: boolean;
  /** A later run of the same context showed up: ours is over. */
  superseded: boolean;
}

export class AgentClient {
  readonly #options: AgentClientOptions;
  readonly #transport: Transport;
  readonly #fetch: typeof fetch;
  readonly #reconnect: Required<ReconnectOptions>;
  readonly #notifier: Notifier;
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
    this.#fetch = options.fetch ?? ((input, init) => globalThis.fetch(input, init));
    this.#transport = options.transport ?? new SseTransport({ fetch: this.#fetch });
    this.#reconnect = reconnectLimits(options.reconnect);
    this.#notifier = new Notifier(options.schedule);
    this.#state = initialReducerState(emptySnapshot(options.contextId ?? null));
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
    const promise = this.#hydrate(contextId, controller.signal);
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
      const pending = this.#pendingInterrupt();
      if (pending) throw decisionPending(pending.interruptId);
      return await this.#stream(text, job);
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
      return await this.#answer(contextId, interrupt, value, job);
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
      if (this.#state.snapshot.interrupt && contextId !== null) await this.#endWaitingRun(contextId);
      return;
    }
    if (!job.runKnown || contextId === null) {
      await new Promise<void>((resolve, reject) => job.stops.push({ resolve, reject }));
      return;
    }
    await this.#transport.stop({ ...this.#target(), contextId });
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

  async #stream(text: string, job: Job): Promise<SendResult> {
    const signal = job.controller.signal;
    const before = this.#state.snapshot;
    const user = this.#turn("user", text, false);
    const reply = this.#turn("assistant", "", true);
    this.#commit({
      ...this.#state,
      runId: null,
      snapshot: {
        ...before,
        turns: [...before.turns, user, reply],
        thinking: "",
        activity: [],
        error: null,
        status: "streaming",
      },
    });

    const body: RunRequest = { message: { text } };
    if (before.contextId !== null) body.contextId = before.contextId;
    try {
      const frames = () => this.#transport.run({ ...this.#target(), body, signal });
      return await this.#follow(frames, false, job);
    } catch (caught) {
      if (signal.aborted) throw aborted(caught);
      let error = toThinwireError(caught);
      // A request that produced no frame leaves no trace but the error.
      this.#fail(error, job.runKnown ? null : user.id, reply.id);
      if (error.code === "decision_pending" && before.contextId !== null) {
        // The conversation waits for a decision this client did not know of (another tab, say): show it.
        const interrupt = await this.#refresh(before.contextId, job, signal);
        if (signal.aborted) throw aborted(caught);
        if (error.interruptId === undefined && interrupt) error = withInterruptId(error, interrupt.interruptId);
      }
      throw error;
    }
  }

  /** Sends the decision and follows the run it continues, in a fresh reply. */
  async #answer(contextId: string, interrupt: InterruptRequest, value: unknown, job: Job): Promise<SendResult> {
    const signal = job.controller.signal;
    const before = this.#state.snapshot;
    const reply = this.#turn("assistant", "", true);
    this.#commit({
      ...this.#state,
      runId: null,
      snapshot: {
        ...before,
        turns: [...before.turns, reply],
        thinking: "",
        activity: [],
        error: null,
        status: "streaming",
        interrupt: null,
      },
    });
    const { interruptId } = interrupt;
    try {
      const frames = () => this.#transport.decide({ ...this.#target(), contextId, interruptId, value, signal });
      return await this.#follow(frames, false, job);
    } catch (caught) {
      if (signal.aborted) throw aborted(caught);
      const error = toThinwireError(caught);
      if (job.runKnown) {
        this.#fail(error, null, reply.id);
        throw error;
      }
      // Refused before the continued run began: the question is still open, unless the server says it is gone.
      const gone = error.code === "interrupt_answered" || error.code === "interrupt_not_found";
      this.#fail(error, null, reply.id, gone ? null : interrupt);
      if (gone) await this.#refresh(contextId, job, signal);
      throw error;
    }
  }

  /** A stop while a decision is pending: the server ends the waiting run with an empty `stopped` reply. */
  async #endWaitingRun(contextId: string): Promise<void> {
    const controller = new AbortController();
    this.#sideRequests.add(controller);
    try {
      await this.#transport.stop({ ...this.#target(), contextId, signal: controller.signal });
      if (controller.signal.aborted || this.#run || this.#following) return;
      if (this.#state.snapshot.contextId !== contextId) return;
      // Show what the server records at once; the transcript then confirms it.
      const snapshot = this.#state.snapshot;
      this.#commit({
        ...this.#state,
        snapshot: {
          ...snapshot,
          turns: [...snapshot.turns, this.#turn("assistant", "", false, [], "stopped")],
          interrupt: null,
          error: null,
        },
      });
      await this.#refresh(contextId, null, controller.signal);
    } finally {
      this.#sideRequests.delete(controller);
    }
  }

  /**
   * Shows the server's transcript and pending interrupt again, keeping turn ids;
   * best effort. Only while `owner` (a job, or null: nothing) is what runs.
   * Resolves with the pending interrupt, or undefined when nothing was shown.
   */
  async #refresh(contextId: string, owner: Job | null, signal: AbortSignal): Promise<InterruptRequest | null | undefined> {
    let transcript: Transcript;
    try {
      transcript = await fetchTranscript(this.#fetch, this.#transcriptUrl(contextId), this.#headers(), signal);
    } catch {
      return undefined;
    }
    const running = this.#following ?? this.#run;
    if (signal.aborted || running !== owner || this.#state.snapshot.contextId !== contextId) return undefined;
    const interrupt = publicInterrupt(transcript.pendingInterrupt);
    this.#commit({
      ...this.#state,
      snapshot: { ...this.#state.snapshot, turns: this.#replaceTurns(publicTurns(transcript.turns)), interrupt },
    });
    return interrupt;
  }

  /** Follows a run found in progress: a fresh reply after the transcript, built from the run's frames. */
  #resume(contextId: string, runId: string, turns: Turn[], interrupt: InterruptRequest | null): void {
    const job = newJob();
    job.runKnown = true;
    this.#following = job;
    const reply = this.#turn("assistant", "", true);
    this.#commit({
      runId,
      lastSeq: null,
      snapshot: {
        ...this.#state.snapshot,
        turns: [...turns, reply],
        thinking: "",
        activity: [],
        error: null,
        status: "streaming",
        interrupt,
      },
    });
    const signal = job.controller.signal;
    const frames = () => this.#transport.attach({ ...this.#target(), contextId, after: 0, signal });
    this.#follow(frames, true, job)
      .catch((caught: unknown) => {
        if (!signal.aborted) this.#fail(toThinwireError(caught), null, reply.id);
      })
      .finally(() => {
        if (this.#following === job) this.#following = null;
        settleStops(job);
      });
  }

  /**
   * Reads a run to its `done`, attaching again (with backoff) after a stream
   * that broke or ended early. Throws the error to show when it gives up.
   */
  async #follow(open: () => AsyncIterable<Frame>, attaching: boolean, job: Job): Promise<SendResult> {
    const signal = job.controller.signal;
    const limits = this.#reconnect;
    let attempt = 0;
    for (;;) {
      let failure: ThinwireError;
      try {
        const outcome = await this.#read(open(), job);
        if (outcome.done) return resultOf(outcome.done);
        if (outcome.progress) attempt = 0;
        const { runId } = this.#state;
        const { contextId } = this.#state.snapshot;
        if (attaching && runId !== null && contextId !== null && (outcome.frames === 0 || outcome.superseded)) {
          // Nothing left to follow: the run ended while we were away.
          const settled = await this.#settle(contextId, runId, signal);
          if (settled) return settled;
        }
        failure = new ThinwireError("stream_interrupted", "The stream ended before the reply was complete.", {
          retryable: true,
        });
      } catch (caught) {
        if (signal.aborted) throw aborted(caught);
        failure = toThinwireError(caught);
        if (!isReconnectable(failure)) throw failure;
      }
      if (signal.aborted) throw aborted();
      const contextId = this.#state.snapshot.contextId;
      // Without a run_start there is no run to attach to (it may never have started).
      if (!job.runKnown || contextId === null || attempt >= limits.attempts) throw failure;
      this.#setStatus("reconnecting");
      await sleep(backoffDelay(attempt, limits), signal);
      attempt += 1;
      const after = this.#state.lastSeq ?? 0;
      open = () => this.#transport.attach({ ...this.#target(), contextId, after, signal });
      attaching = true;
    }
  }

  /** Reads one stream into the snapshot, until its `done` or its end. */
  async #read(frames: AsyncIterable<Frame>, job: Job): Promise<ReadOutcome> {
    const signal = job.controller.signal;
    const outcome: ReadOutcome = { done: null, frames: 0, progress: false, superseded: false };
    // A transport that ignores the signal must not keep send() pending after reset().
    const abortion = new Promise<never>((_, reject) => {
      if (signal.aborted) reject(aborted());
      signal.addEventListener("abort", () => reject(aborted()), { once: true });
    });
    abortion.catch(() => undefined);
    let iterator: AsyncIterator<Frame> | undefined;
    try {
      iterator = frames[Symbol.asyncIterator]();
      for (;;) {
        const step = await Promise.race([iterator.next(), abortion]);
        if (step.done) return outcome;
        const frame = step.value;
        outcome.frames += 1;
        if (this.#supersedes(frame)) outcome.superseded = true;
        let next = reduceFrame(this.#state, frame);
        if (next === this.#state) continue;
        outcome.progress = true;
        if (next.snapshot.status === "reconnecting") {
          next = { ...next, snapshot: { ...next.snapshot, status: "streaming" } };
        }
        this.#commit(next, true, true);
        if (!job.runKnown) {
          job.runKnown = true;
          this.#sendStops(job);
        }
        if (frame.type === "done") {
          // The server ends the stream right after `done`: read it to the end instead of
          // cancelling, so the request completes cleanly rather than as an aborted one.
          void drain(iterator);
          outcome.done = frame;
          return outcome;
        }
      }
    } catch (caught) {
      if (signal.aborted) {
        void Promise.resolve(iterator?.return?.()).catch(() => undefined);
        throw aborted(caught);
      }
      throw caught;
    }
  }

  /** A frame of a later run of our context: the server has moved on from ours. */
  #supersedes(frame: Frame): boolean {
    const { runId, lastSeq, snapshot } = this.#state;
    return (
      frame.type !== "rejected" &&
      runId !== null &&
      frame.contextId === snapshot.contextId &&
      frame.runId !== runId &&
      typeof frame.seq === "number" &&
      frame.seq > (lastSeq ?? 0)
    );
  }

  /** The run ended unseen: its reply is the transcript's last assistant turn. Null if it still runs. */
  async #settle(contextId: string, runId: string, signal: AbortSignal): Promise<SendResult | null> {
    const transcript = await fetchTranscript(this.#fetch, this.#transcriptUrl(contextId), this.#headers(), signal);
    if (signal.aborted) throw aborted();
    if (transcript.activeRunId === runId) return null;
    const turns = publicTurns(transcript.turns);
    const reply = [...turns].reverse().find((turn) => turn.role === "assistant");
    if (!reply) {
      throw new ThinwireError("stream_interrupted", "The run ended without a reply.", { retryable: false });
    }
    const stopReason = reply.stopReason ?? "end";
    const failed = stopReason === "error";
    const snapshot = this.#state.snapshot;
    this.#commit({
      ...this.#state,
      snapshot: {
        ...snapshot,
        turns: this.#replaceTurns(turns),
        interrupt: publicInterrupt(transcript.pendingInterrupt),
        status: failed ? "error" : "idle",
        error:
          failed && snapshot.error === null
            ? { code: "run_failed", message: "The run failed.", retryable: false }
            : snapshot.error,
      },
    });
    return { text: reply.text, toolCalls: [...reply.toolCalls], contextId, runId, stopReason };
  }

  /**
   * Shows a failed run. A request that produced no frame leaves no trace but
   * the error (`dropUserId` set); otherwise the partial reply is kept, closed.
   * `interrupt`, when given, becomes the pending one.
   */
  #fail(
    error: ThinwireError,
    dropUserId: string | null,
    replyId: string,
    interrupt: InterruptRequest | null = this.#state.snapshot.interrupt,
  ): void {
    const turns = this.#state.snapshot.turns.flatMap((turn): Turn[] => {
      if (turn.id === dropUserId) return [];
      if (turn.id !== replyId) return [turn];
      if (dropUserId !== null || turn.text === "") return [];
      return [{ ...turn, streaming: false }];
    });
    this.#commit({
      ...this.#state,
      snapshot: { ...this.#state.snapshot, turns, interrupt, status: "error", error: errorInfo(error) },
    });
  }

  async #hydrate(contextId: string, signal: AbortSignal): Promise<void> {
    try {
      const transcript = await fetchTranscript(this.#fetch, this.#transcriptUrl(contextId), this.#headers(), signal);
      if (signal.aborted) return;
      const turns = publicTurns(transcript.turns).map((turn) => this.#fromTranscript(turn));
      const interrupt = publicInterrupt(transcript.pendingInterrupt);
      const active = transcript.activeRunId;
      if (typeof active === "string" && active !== "") {
        this.#resume(contextId, active, turns, interrupt);
      } else {
        this.#commit({ ...this.#state, snapshot: { ...this.#state.snapshot, turns, interrupt, status: "idle" } });
      }
    } catch (caught) {
      if (signal.aborted) return;
      const error = toThinwireError(caught);
      if (error.code === "context_not_found") {
        this.#commit(initialReducerState(emptySnapshot(null)));
      } else {
        this.#commit({
          ...this.#state,
          snapshot: { ...this.#state.snapshot, status: "error", error: errorInfo(error) },
        });
      }
    }
  }

  /** Stops asked for before the run was known go out now. */
  #sendStops(job: Job): void {
    const contextId = this.#state.snapshot.contextId;
    const stops = job.stops.splice(0);
    if (stops.length === 0 || contextId === null) return;
    const request = this.#transport.stop({ ...this.#target(), contextId });
    for (const stop of stops) request.then(stop.resolve, stop.reject);
  }

  #pendingInterrupt(): InterruptRequest | null {
    return this.#state.snapshot.interrupt;
  }

  #setStatus(status: Status): void {
    if (this.#state.snapshot.status === status) return;
    this.#commit({ ...this.#state, snapshot: { ...this.#state.snapshot, status } });
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

  #turn(
    role: Turn["role"],
    text: string,
    streaming: boolean,
    toolCalls: readonly string[] = [],
    stopReason: StopReason | null = null,
  ): Turn {
    this.#turnCount += 1;
    return { id: `${role}-${this.#turnCount}`, role, text, toolCalls, streaming, stopReason };
  }

  #fromTranscript(turn: TranscriptTurn, id?: string): Turn {
    const fresh = this.#turn(turn.role, turn.text, false, turn.toolCalls, turn.stopReason ?? null);
    return id === undefined ? fresh : { ...fresh, id };
  }

  /** The transcript's turns, keeping the ids of the turns shown at the same places (stable React keys). */
  #replaceTurns(turns: readonly TranscriptTurn[]): Turn[] {
    const shown = this.#state.snapshot.turns;
    return turns.map((turn, index) => {
      const current = shown[index];
      return this.#fromTranscript(turn, current?.role === turn.role ? current.id : undefined);
    });
  }

  #target(): TransportTarget {
    return {
      baseUrl: (this.#options.baseUrl ?? "").replace(/\/+$/, ""),
      agent: this.#options.agent,
      headers: this.#headers(),
    };
  }

  #transcriptUrl(contextId: string): string {
    return agentUrl(this.#target(), `/contexts/${encodeURIComponent(contextId)}`);
  }

  #headers(): Record<string, string> {
    return { ...this.#options.headers, [PROTOCOL_HEADER]: PROTOCOL_VERSION };
  }
}

function newJob(): Job {
  return { controller: new AbortController(), runKnown: false, stops: [] };
}

/** A job that ended before its run was known has nothing left to stop. */
function settleStops(job: Job): void {
  for (const stop of job.stops.splice(0)) stop.resolve();
}

function resultOf(frame: DoneFrame): SendResult {
  return {
    text: frame.text,
    toolCalls: [...frame.toolCalls],
    contextId: frame.contextId,
    runId: frame.runId,
    stopReason: frame.stopReason,
  };
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) {
      reject(aborted());
      return;
    }
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(aborted());
    };
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

async function drain(iterator: AsyncIterator<Frame>): Promise<void> {
  try {
    while (!(await iterator.next()).done);
  } catch {
    // Whatever follows `done` cannot change the result.
  }
}

function disposed(): ThinwireError {
  return new ThinwireError("disposed", "This client has been disposed.");
}

function decisionPending(interruptId: string): ThinwireError {
  return new ThinwireError("decision_pending", "Answer the pending decision first.", { interruptId });
}

/** The same error, naming the interrupt it is about. */
function withInterruptId(error: ThinwireError, interruptId: string): ThinwireError {
  return new ThinwireError(error.code, error.message, {
    ...(error.status === undefined ? {} : { status: error.status }),
    retryable: error.retryable,
    cause: error,
    interruptId,
  });
}

function busy(): ThinwireError {
  return new ThinwireError("context_busy", "A message is already being answered.", { retryable: true });
}

function aborted(cause?: unknown): ThinwireError {
  return new ThinwireError("aborted", "The request was cancelled.", cause === undefined ? {} : { cause });
}

function errorInfo(error: ThinwireError): AgentErrorInfo {
  return { code: error.code, message: error.message, retryable: error.retryable };
}
