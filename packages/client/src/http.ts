/**
 * HTTP requests and responses: the typed error of a refusal, the protocol check
 * every response gets, and how a request ends cleanly — its own signal, let go
 * once it completed, and a body read to its end rather than cancelled.
 */
import { resolveUrl, serverError, ThinwireError, toThinwireError } from "./errors.js";
import { PROTOCOL_HEADER, PROTOCOL_VERSION, RETRYABLE_CODES } from "./generated/wire.js";

/**
 * fetch's `credentials`: whether a request carries the page's cookies. Spelled
 * out rather than the DOM's `RequestCredentials`, so the types need no DOM
 * library (a Node.js project).
 */
export type CredentialsMode = "omit" | "same-origin" | "include";

/** What was asked: named by an error that has nothing better to say. */
export interface RequestLine {
  method: string;
  url: string;
}

/**
 * Builds the typed error for a non-2xx response from its `{"error": {code, message, retryable}}`
 * body. A body without `retryable` (an older server, a proxy's page) is judged by its code and status.
 * One without a code (a proxy's page, another server's) is `http_error`, naming the request — and
 * for a 404, the likeliest cause: a `baseUrl` where no thinwire server answers.
 */
export async function errorFromResponse(response: Response, request: RequestLine): Promise<ThinwireError> {
  const status = response.status;
  let code = "http_error";
  const answered = `HTTP ${status}${response.statusText ? ` ${response.statusText}` : ""} for ${request.method} ${request.url}`;
  let message =
    status === 404 ? `${answered}: no thinwire server answers there; is baseUrl right?` : `${answered}.`;
  let retryable: boolean | undefined;
  let interruptId: string | undefined;
  try {
    const body: unknown = await response.json();
    const detail = (body as { error?: unknown } | null)?.error as
      | { code?: unknown; message?: unknown; retryable?: unknown; interruptId?: unknown }
      | undefined;
    if (detail && typeof detail.code === "string") {
      code = detail.code;
      if (typeof detail.message === "string") message = detail.message;
      if (typeof detail.retryable === "boolean") retryable = detail.retryable;
      if (typeof detail.interruptId === "string") interruptId = detail.interruptId;
    }
  } catch {
    // Not JSON (a proxy's HTML page, an empty body): keep the generic error.
  }
  return serverError(code, message, {
    status,
    retryable: retryable ?? (RETRYABLE_CODES.has(code) || status >= 500 || status === 429),
    ...(interruptId === undefined ? {} : { interruptId }),
  });
}

/**
 * The global `fetch`, looked up at call time, for every request of a client,
 * a list or a transport given no `fetch` of its own. A URL it could not
 * resolve — relative, with no page to resolve it against: Node.js without an
 * absolute `baseUrl` — is refused `invalid_url` before the request, at once and
 * never retried; `fetch` would throw a TypeError, whose message differs by
 * runtime, and which reads like a network failure. A `fetch` of the app's own
 * gets the URL as built: it may resolve a relative one itself (a test's fake).
 */
export const globalFetch: typeof fetch = async (input, init) => {
  if (typeof input === "string") resolveUrl(input, "there is no page to resolve it against; give an absolute baseUrl.");
  return globalThis.fetch(input, init);
};

/** A server that announces another protocol version gets a clear error, not a hang. */
export function checkProtocol(response: Response): void {
  const version = response.headers.get(PROTOCOL_HEADER);
  if (version !== null && version !== PROTOCOL_VERSION) {
    throw new ThinwireError(
      "protocol_mismatch",
      `The server speaks thinwire protocol ${version}; this client speaks ${PROTOCOL_VERSION}.`,
      { status: response.status },
    );
  }
}

/** A signal of one request's own: see `requestSignal`. */
export interface RequestSignal {
  signal: AbortSignal;
  /** Stops following the caller's signal. */
  release(): void;
  /** Cancels this request alone. */
  abort(): void;
}

/**
 * A signal of one request's own, following `signal` until `release()`. A job's signal
 * outlives its requests (a send's POST, then the attaches after a break); each request
 * releases it once it completed, so cancelling the job later never aborts a request that
 * already ended — browsers list such a request as cancelled (`net::ERR_ABORTED`).
 */
export function requestSignal(signal: AbortSignal | undefined): RequestSignal {
  const controller = new AbortController();
  const abort = () => controller.abort();
  if (!signal) return { signal: controller.signal, release: () => undefined, abort };
  if (signal.aborted) controller.abort(signal.reason);
  const follow = () => controller.abort(signal.reason);
  signal.addEventListener("abort", follow, { once: true });
  return { signal: controller.signal, release: () => signal.removeEventListener("abort", follow), abort };
}

/** Reads what is left of a body to its end, so the request completes rather than being cancelled. */
export async function finish(response: Response): Promise<void> {
  await response.arrayBuffer().catch(() => undefined);
}

/**
 * The body of a streamed response, for a reader. Chromium lists a
 * `Cache-Control: no-store` response that was read to its end through
 * `body.getReader()` as cancelled (`net::ERR_ABORTED`) in its network panel,
 * though nothing cancelled it; the same bytes read from a clone of the response,
 * whose other branch is cancelled at once, finish cleanly. Cancelling the
 * stream returned still cancels the request (both branches are then cancelled).
 */
export function streamedBody(response: Response): ReadableStream<Uint8Array> | null {
  if (!response.body) return null;
  try {
    // A clone tees the body: `response.body` is one branch afterwards, the clone's the other.
    void response.clone().body?.cancel().catch(() => undefined);
  } catch {
    // A body that cannot be teed is read as it is.
  }
  return response.body;
}

/** How the client makes requests of its own (transcripts, branches, the conversation list). */
export interface JsonRequests {
  fetch: typeof fetch;
  credentials: CredentialsMode;
}

/**
 * A request answered with JSON, or with nothing (204): the parsed body, or
 * null. A `body` goes as JSON. Throws the server's typed error,
 * `protocol_error` for an answer that is not JSON, `network_error`, or
 * `aborted` when `signal` fires. The answer is read whole, and the request
 * let go of `signal` once it completed.
 */
export async function requestJson(
  requests: JsonRequests,
  url: string,
  init: { method: string; headers: Record<string, string>; body?: unknown },
  signal?: AbortSignal,
): Promise<unknown> {
  const request = requestSignal(signal);
  const headers: Record<string, string> = { accept: "application/json", ...init.headers };
  if (init.body !== undefined) headers["content-type"] = "application/json";
  try {
    const response = await requests.fetch(url, {
      method: init.method,
      headers,
      ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) }),
      credentials: requests.credentials,
      signal: request.signal,
    });
    if (!response.ok) throw await errorFromResponse(response, { method: init.method, url });
    checkProtocol(response);
    if (response.status === 204) {
      await finish(response);
      return null;
    }
    return await response.json();
  } catch (error) {
    if (error instanceof SyntaxError) {
      throw new ThinwireError("protocol_error", `The answer to ${init.method} ${url} is not JSON.`, { cause: error });
    }
    throw toThinwireError(error, signal);
  } finally {
    request.release();
  }
}
