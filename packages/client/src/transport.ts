/** The Transport interface: what carries a client's requests to the server and the frames back. */
import {
  type EditRequest,
  type Frame,
  PROTOCOL_HEADER,
  PROTOCOL_VERSION,
  type RegenerateRequest,
  type RejectedFrame,
  type RunRequest,
  type StopResult,
} from "./generated/wire.js";

/** A frame of a run: every kind but the WebSocket-only `rejected`, which transports turn into errors. */
export type RunFrame = Exclude<Frame, RejectedFrame>;

/** Where a request goes: the transport builds its URL (HTTP or WebSocket) from these. */
export interface TransportTarget {
  /** Prefix of the thinwire routes without a trailing slash; `""` means the page origin. */
  baseUrl: string;
  /** The agent's name, as mounted on the server (not yet URL-encoded). */
  agent: string;
  /**
   * Includes the protocol header. A browser WebSocket cannot send headers: with
   * none but the protocol header, cookies authenticate it; with more, the
   * WebSocket transport trades them for a ticket first.
   */
  headers: Record<string, string>;
}

/** Start a run: `POST /agents/{agent}/runs`. */
export interface TransportRunRequest extends TransportTarget {
  body: RunRequest;
  /** Aborted by `reset()` and `dispose()`; the transport must stop reading. */
  signal: AbortSignal;
}

/** Follow the latest run of a context: `GET /agents/{agent}/contexts/{id}/events`. */
export interface TransportAttachRequest extends TransportTarget {
  contextId: string;
  /** Send only frames with a greater seq (the SSE `Last-Event-ID`); 0 follows a run from its start. */
  after: number;
  signal: AbortSignal;
}

/**
 * Answer the pending interrupt: `POST /agents/{agent}/contexts/{id}/decisions`.
 * The answer is a stream of the continued run, a new run of the same context.
 */
export interface TransportDecideRequest extends TransportTarget {
  contextId: string;
  interruptId: string;
  /** One of the offered options, or JSON matching the interrupt's schema. */
  value: unknown;
  signal: AbortSignal;
}

/**
 * Answer the last user message again, on a new branch (the previous reply
 * stays as its sibling): `POST /agents/{agent}/contexts/{id}/regenerate`. The
 * answer is the stream of the new run.
 */
export interface TransportRegenerateRequest extends TransportTarget {
  contextId: string;
  body: RegenerateRequest;
  signal: AbortSignal;
}

/**
 * Send a message in place of the user turn `body.turnId`, on a new branch
 * forking there: `POST /agents/{agent}/contexts/{id}/edits`. The answer is the
 * stream of the new run.
 */
export interface TransportEditRequest extends TransportTarget {
  contextId: string;
  body: EditRequest;
  signal: AbortSignal;
}

/** Stop the run in progress, or end the run waiting for a decision: `POST /agents/{agent}/contexts/{id}/stop`. */
export interface TransportStopRequest extends TransportTarget {
  contextId: string;
  signal?: AbortSignal;
}

/**
 * How frames get from the server to the client. SSE and WebSocket are two
 * implementations; `MockTransport` (`@thinwire/client/testing`) is the trivial
 * one for tests.
 *
 * Contract: `run`, `decide`, `regenerate`, `edit` and `attach` yield the
 * frames of one run in order and return when the server ends the stream
 * (`decide`: of the run the decision continues, which starts with its own
 * `run_start`; `regenerate` and `edit`: of the new run they start); `attach` returns without a frame when there
 * is nothing to follow (HTTP 204, WebSocket `no_run`). They throw a
 * `ThinwireError`: the server's typed error for a refused request (with
 * `status` over HTTP), `network_error` (retryable) when the connection fails or
 * drops, `aborted` when the signal fires. Frames of unknown types may be
 * yielded; the client ignores them. `stop` resolves once the server accepted
 * the request; the stream of the run then ends with a `done` frame. It
 * resolves with the server's answer when there is one (HTTP has one, a
 * WebSocket none: there it resolves once the socket is heard from again): `stopping` false says no run was going on, so the stream
 * the client reads will bring nothing more — it ends it and attaches again.
 *
 * `close`, when there is one, releases what the transport holds open (a
 * socket); a later request may open it again. An `AgentClient` closes a
 * transport it created itself when it is disposed, never one it was given.
 */
export interface Transport {
  run(request: TransportRunRequest): AsyncIterable<Frame>;
  attach(request: TransportAttachRequest): AsyncIterable<Frame>;
  decide(request: TransportDecideRequest): AsyncIterable<Frame>;
  regenerate(request: TransportRegenerateRequest): AsyncIterable<Frame>;
  edit(request: TransportEditRequest): AsyncIterable<Frame>;
  stop(request: TransportStopRequest): Promise<StopResult | void>;
  close?(): void;
}

/** `{baseUrl}/agents/{agent}{path}`, the agent's name encoded. */
export function agentUrl(target: Pick<TransportTarget, "baseUrl" | "agent">, path: string): string {
  return `${target.baseUrl.replace(/\/+$/, "")}/agents/${encodeURIComponent(target.agent)}${path}`;
}

/** Where a client's requests go: its agent and `baseUrl`, and its `headers` with the protocol header. */
export function requestTarget(options: {
  agent: string;
  baseUrl?: string | undefined;
  headers?: Record<string, string> | undefined;
}): TransportTarget {
  return {
    baseUrl: (options.baseUrl ?? "").replace(/\/+$/, ""),
    agent: options.agent,
    headers: { ...options.headers, [PROTOCOL_HEADER]: PROTOCOL_VERSION },
  };
}
