/**
 * The HTTP transport: a run is a POST answered with `text/event-stream`, and
 * so are a decision (the stream of the run it continues), a regeneration and
 * an edit (the streams of the runs they start); a reattach is a GET
 * of the context's events with `Last-Event-ID`, a stop a POST.
 *
 * A stream silent past twice the heartbeat interval the server announces
 * (`silence.ts`) is cancelled and fails as a dropped connection would.
 *
 * Every request ends cleanly: a stream is read to its end (the server ends it
 * right after `done`; the client reads on after it), through one branch of a
 * tee so Chromium does not list it as cancelled (`streamedBody`), a stop's
 * answer is read, and a request that completed is cut loose from the caller's
 * signal, so a later abort of the job never marks it cancelled.
 */
import { ThinwireError, toThinwireError } from "./errors.js";
import { type DecisionRequest, type Frame, HEARTBEAT_HEADER, type StopResult } from "./generated/wire.js";
import {
  checkProtocol,
  type CredentialsMode,
  errorFromResponse,
  globalFetch,
  requestSignal,
  streamedBody,
} from "./http.js";
import { SilenceWatch, silenceLimitMs, silentStream } from "./silence.js";
import { parseSse, type SseEvent } from "./sse.js";
import {
  agentUrl,
  type RunFrame,
  type Transport,
  type TransportAttachRequest,
  type TransportDecideRequest,
  type TransportEditRequest,
  type TransportRegenerateRequest,
  type TransportRunRequest,
  type TransportStopRequest,
} from "./transport.js";

export interface SseTransportOptions {
  /** Defaults to the global `fetch`, looked up at call time. */
  fetch?: typeof fetch | undefined;
  /**
   * fetch's `credentials` for every request: `"same-origin"` (the default) sends
   * cookies to the page's own origin only; `"include"` also to a server of
   * another origin (which must allow it with CORS).
   */
  credentials?: CredentialsMode | undefined;
}

export class SseTransport implements Transport {
  readonly #fetch: typeof fetch;
  readonly #credentials: CredentialsMode;

  constructor(options: SseTransportOptions = {}) {
    this.#fetch = options.fetch ?? globalFetch;
    this.#credentials = options.credentials ?? "same-origin";
  }

  run({ body, headers, signal, ...target }: TransportRunRequest): AsyncGenerator<Frame> {
    return this.#post(agentUrl(target, "/runs"), body, headers, signal);
  }

  attach({ contextId, after, headers, signal, ...target }: TransportAttachRequest): AsyncGenerator<Frame> {
    return this.#stream(
      agentUrl(target, `/contexts/${encodeURIComponent(contextId)}/events`),
      {
        method: "GET",
        headers: { accept: "text/event-stream", ...headers, "Last-Event-ID": String(after) },
      },
      signal,
    );
  }

  decide({ contextId, interruptId, value, headers, signal, ...target }: TransportDecideRequest): AsyncGenerator<Frame> {
    const body: DecisionRequest = { interruptId, value };
    return this.#post(agentUrl(target, `/contexts/${encodeURIComponent(contextId)}/decisions`), body, headers, signal);
  }

  regenerate({ contextId, body, headers, signal, ...target }: TransportRegenerateRequest): AsyncGenerator<Frame> {
    return this.#post(agentUrl(target, `/contexts/${encodeURIComponent(contextId)}/regenerate`), body, headers, signal);
  }

  edit({ contextId, body, headers, signal, ...target }: TransportEditRequest): AsyncGenerator<Frame> {
    return this.#post(agentUrl(target, `/contexts/${encodeURIComponent(contextId)}/edits`), body, headers, signal);
  }

  /** Resolves with the server's answer, when it is one (`stopping` false: no run was going on). */
  async stop({ contextId, headers, signal, ...target }: TransportStopRequest): Promise<StopResult | void> {
    const request = requestSignal(signal);
    const url = agentUrl(target, `/contexts/${encodeURIComponent(contextId)}/stop`);
    try {
      let response: Response;
      try {
        response = await this.#fetch(url, {
          method: "POST",
          headers: { accept: "application/json", ...headers },
          credentials: this.#credentials,
          signal: request.signal,
        });
      } catch (error) {
        throw toThinwireError(error, signal);
      }
      if (!response.ok) throw await errorFromResponse(response, { method: "POST", url });
      checkProtocol(response);
      const answer: unknown = await response.json().catch(() => undefined);
      return isStopResult(answer) ? answer : undefined;
    } finally {
      request.release();
    }
  }

  /** A POST of `body` as JSON, answered with the stream of a run. */
  #post(url: string, body: unknown, headers: Record<string, string>, signal: AbortSignal): AsyncGenerator<Frame> {
    return this.#stream(
      url,
      {
        method: "POST",
        headers: { "content-type": "application/json", accept: "text/event-stream", ...headers },
        body: JSON.stringify(body),
      },
      signal,
    );
  }

  async *#stream(url: string, init: RequestInit, signal: AbortSignal): AsyncGenerator<Frame> {
    // Released when the stream ended, failed or was left: only a request in flight follows `signal`.
    const request = requestSignal(signal);
    try {
      let response: Response;
      try {
        response = await this.#fetch(url, { ...init, credentials: this.#credentials, signal: request.signal });
      } catch (error) {
        throw toThinwireError(error, signal);
      }
      if (!response.ok) throw await errorFromResponse(response, { method: init.method ?? "GET", url });
      checkProtocol(response);
      if (response.status === 204) return; // nothing to follow
      const contentType = response.headers.get("content-type") ?? "";
      if (!contentType.toLowerCase().startsWith("text/event-stream") || !response.body) {
        await response.body?.cancel().catch(() => undefined);
        throw new ThinwireError(
          "protocol_error",
          `Expected an event stream, got ${contentType || "no content type"}.`,
          { status: response.status },
        );
      }
      const limit = silenceLimitMs(response.headers.get(HEARTBEAT_HEADER));
      const watch = limit > 0 ? new SilenceWatch(limit, request.abort) : null;
      try {
        for await (const event of parseSse(streamedBody(response)!, () => watch?.heard())) {
          yield decodeFrame(event);
        }
      } catch (error) {
        if (watch?.fired && !signal.aborted) throw silentStream(limit);
        throw toThinwireError(error, signal);
      } finally {
        watch?.stop();
      }
    } finally {
      request.release();
    }
  }
}

function isStopResult(value: unknown): value is StopResult {
  return typeof value === "object" && value !== null && typeof (value as { stopping?: unknown }).stopping === "boolean";
}

function decodeFrame(event: SseEvent): Frame {
  let value: unknown;
  try {
    value = JSON.parse(event.data);
  } catch (error) {
    throw new ThinwireError("protocol_error", "The server sent an event that is not JSON.", {
      cause: error,
    });
  }
  if (typeof value !== "object" || value === null || typeof (value as { type?: unknown }).type !== "string") {
    throw new ThinwireError("protocol_error", "The server sent an event that is not a frame.");
  }
  const frame = value as RunFrame;
  // The SSE id is the frame's seq; fill it in for a frame that left it out.
  if (typeof frame.seq !== "number" && /^\d+$/.test(event.id)) {
    return { ...frame, seq: Number(event.id) };
  }
  return frame;
}
