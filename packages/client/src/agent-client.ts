/**
 * AgentClient: a small store over one conversation with one agent.
 *
 * It owns the wire (requests, dedupe by `seq`, hydration of the public
 * transcript) and remembers exactly one thing about the conversation: its
 * `contextId`. Everything else is derived view state, rebuilt from the server.
 * `subscribe` / `getSnapshot` follow the `useSyncExternalStore` contract.
 */
import { ThinwireError, toThinwireError } from "./errors.js";
import {
  type Frame,
  PROTOCOL_HEADER,
  PROTOCOL_VERSION,
  type RunRequest,
  type StopReason,
} from "./generated/wire.js";
import { fetchTranscript, publicTurns } from "./http.js";
import { initialReducerState, reduceFrame, type ReducerState } from "./reduce.js";
import { emptySnapshot, type AgentErrorInfo, type Snapshot, type Turn } from "./snapshot.js";
import { SseTransport } from "./sse-transport.js";
import type { Transport } from "./transport.js";

export interface AgentClientOptions {
  /** The agent's name, as mounted on the server. */
  agent: string;
  /** Prefix of the thinwire routes, e.g. `"/api"`; defaults to the page origin. */
  baseUrl?: string;
  /** Resume this conversation: `start()` loads its transcript. */
  contextId?: string | null;
  /** Defaults to an `SseTransport` over `fetch`. */
  transport?: Transport;
  /** Used for the transcript, and by the default transport. */
  fetch?: typeof fetch;
  /** Extra request headers (authentication, say). */
  headers?: Record<string, string>;
  /** Called whenever the conversation id changes: minted by the server, forgotten, reset. */
  onContext?: (contextId: string | null) => void;
}

export interface SendResult {
  text: string;
  toolCalls: string[];
  contextId: string;
  runId: string;
  stopReason: StopReason;
}

export class AgentClient {
  readonly #options: AgentClientOptions;
  readonly #transport: Transport;
  readonly #fetch: typeof fetch;
  readonly #listeners = new Set<() => void>();
  #state: ReducerState;
  #run: AbortController | null = null;
  #hydration: { controller: AbortController; promise: Promise<void> } | null = null;
  #started = false;
  #disposed = false;
  #turnCount = 0;

  constructor(options: AgentClientOptions) {
    if (!options.agent) throw new TypeError("AgentClient needs an agent name.");
    this.#options = options;
    this.#fetch = options.fetch ?? ((input, init) => globalThis.fetch(input, init));
    this.#transport = options.transport ?? new SseTransport({ fetch: this.#fetch });
    this.#state = initialReducerState(emptySnapshot(options.contextId ?? null));
  }

  /** Registers a listener for snapshot changes; returns the unsubscribe function. */
  subscribe = (listener: () => void): (() => void) => {
    if (this.#disposed) return () => undefined;
    this.#listeners.add(listener);
    return () => {
      this.#listeners.delete(listener);
    };
  };

  /** The current view state: the same object until something changes. */
  getSnapshot = (): Snapshot => this.#state.snapshot;

  /**
   * Loads the transcript of the conversation the client was created with.
   * Idempotent; never rejects (failures land in the snapshot). An id the server
   * does not know (`context_not_found`) is forgotten quietly.
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
   * Sends a message and streams the reply into the snapshot. Resolves with the
   * final reply; rejects with a ThinwireError (`invalid_request` for empty text,
   * `context_busy` while another send is in flight, the server's error code,
   * `network_error`, `stream_interrupted`, `aborted`).
   */
  async send(text: string): Promise<SendResult> {
    if (this.#disposed) throw new ThinwireError("disposed", "This client has been disposed.");
    if (typeof text !== "string" || text.trim() === "") {
      throw new ThinwireError("invalid_request", "The message text is empty.");
    }
    if (this.#run) {
      throw new ThinwireError("context_busy", "A message is already being answered.", { retryable: true });
    }
    const controller = new AbortController();
    this.#run = controller;
    try {
      if (this.#hydration) await this.#hydration.promise;
      if (controller.signal.aborted) throw aborted();
      return await this.#stream(text, controller.signal);
    } finally {
      if (this.#run === controller) this.#run = null;
    }
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
    this.#listeners.clear();
  }

  async #stream(text: string, signal: AbortSignal): Promise<SendResult> {
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
    let received = false;
    let iterator: AsyncIterator<Frame> | undefined;
    // A transport that ignores the signal must not keep send() pending after reset().
    const abortion = new Promise<never>((_, reject) => {
      if (signal.aborted) reject(aborted());
      signal.addEventListener("abort", () => reject(aborted()), { once: true });
    });
    abortion.catch(() => undefined);
    try {
      const frames = this.#transport.run({ url: this.#url("/runs"), body, headers: this.#headers(), signal });
      iterator = frames[Symbol.asyncIterator]();
      for (;;) {
        const step = await Promise.race([iterator.next(), abortion]);
        if (step.done) break;
        const frame = step.value;
        const next = reduceFrame(this.#state, frame);
        if (next === this.#state) continue;
        received = true;
        this.#commit(next);
        if (frame.type === "done") {
          // The server ends the stream right after `done`: read it to the end instead of
          // cancelling, so the request completes cleanly rather than as an aborted one.
          void drain(iterator);
          return {
            text: frame.text,
            toolCalls: [...frame.toolCalls],
            contextId: frame.contextId,
            runId: frame.runId,
            stopReason: frame.stopReason,
          };
        }
      }
      throw new ThinwireError("stream_interrupted", "The stream ended before the reply was complete.", {
        retryable: true,
      });
    } catch (caught) {
      if (signal.aborted) {
        void Promise.resolve(iterator?.return?.()).catch(() => undefined);
        throw aborted(caught);
      }
      const error = toThinwireError(caught);
      this.#fail(error, received ? null : user.id, reply.id);
      throw error;
    }
  }

  /**
   * Shows a failed send. A request that produced no frame leaves no trace but
   * the error (`dropUserId` set); otherwise the partial reply is kept, closed.
   */
  #fail(error: ThinwireError, dropUserId: string | null, replyId: string): void {
    const turns = this.#state.snapshot.turns.flatMap((turn): Turn[] => {
      if (turn.id === dropUserId) return [];
      if (turn.id !== replyId) return [turn];
      if (dropUserId !== null || turn.text === "") return [];
      return [{ ...turn, streaming: false }];
    });
    this.#commit({
      ...this.#state,
      snapshot: { ...this.#state.snapshot, turns, status: "error", error: errorInfo(error) },
    });
  }

  async #hydrate(contextId: string, signal: AbortSignal): Promise<void> {
    try {
      const transcript = await fetchTranscript(
        this.#fetch,
        this.#url(`/contexts/${encodeURIComponent(contextId)}`),
        this.#headers(),
        signal,
      );
      if (signal.aborted) return;
      const turns = publicTurns(transcript.turns).map((turn) =>
        this.#turn(turn.role, turn.text, false, turn.toolCalls, turn.stopReason ?? null),
      );
      this.#commit({ ...this.#state, snapshot: { ...this.#state.snapshot, turns, status: "idle" } });
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

  #commit(next: ReducerState, announceContext = true): void {
    const previous = this.#state;
    if (next === previous || this.#disposed) return;
    this.#state = next;
    const contextId = next.snapshot.contextId;
    if (announceContext && contextId !== previous.snapshot.contextId) this.#options.onContext?.(contextId);
    if (next.snapshot === previous.snapshot) return;
    for (const listener of [...this.#listeners]) listener();
  }

  #abortAll(): void {
    this.#run?.abort();
    this.#run = null;
    this.#hydration?.controller.abort();
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

  #url(path: string): string {
    const base = (this.#options.baseUrl ?? "").replace(/\/+$/, "");
    return `${base}/agents/${encodeURIComponent(this.#options.agent)}${path}`;
  }

  #headers(): Record<string, string> {
    return { ...this.#options.headers, [PROTOCOL_HEADER]: PROTOCOL_VERSION };
  }
}

async function drain(iterator: AsyncIterator<Frame>): Promise<void> {
  try {
    while (!(await iterator.next()).done);
  } catch {
    // Whatever follows `done` cannot change the result.
  }
}

function aborted(cause?: unknown): ThinwireError {
  return new ThinwireError("aborted", "The request was cancelled.", cause === undefined ? {} : { cause });
}

function errorInfo(error: ThinwireError): AgentErrorInfo {
  return { code: error.code, message: error.message, retryable: error.retryable };
}
