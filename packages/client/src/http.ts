/** Plain-HTTP helpers shared by the transports and the transcript fetch. */
import { ThinwireError, toThinwireError } from "./errors.js";
import { PROTOCOL_HEADER, PROTOCOL_VERSION, type Transcript, type TranscriptTurn } from "./generated/wire.js";

/** Statuses worth retrying as is: the server was busy or briefly unwell. */
function isRetryableStatus(status: number, code: string): boolean {
  return status >= 500 || status === 429 || code === "context_busy";
}

/** Builds the typed error for a non-2xx response from its `{"error": {code, message}}` body. */
export async function errorFromResponse(response: Response): Promise<ThinwireError> {
  const status = response.status;
  let code = "http_error";
  let message = `HTTP ${status}${response.statusText ? ` ${response.statusText}` : ""}`;
  let interruptId: string | undefined;
  try {
    const body: unknown = await response.json();
    const detail = (body as { error?: unknown } | null)?.error as
      | { code?: unknown; message?: unknown; interruptId?: unknown }
      | undefined;
    if (detail && typeof detail.code === "string") {
      code = detail.code;
      if (typeof detail.message === "string") message = detail.message;
      if (typeof detail.interruptId === "string") interruptId = detail.interruptId;
    }
  } catch {
    // Not JSON (a proxy's HTML page, an empty body): keep the generic error.
  }
  return new ThinwireError(code, message, {
    status,
    retryable: isRetryableStatus(status, code),
    ...(interruptId === undefined ? {} : { interruptId }),
  });
}

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

/** `GET .../contexts/{contextId}`: the public transcript of a conversation. */
export async function fetchTranscript(
  fetchImpl: typeof fetch,
  url: string,
  headers: Record<string, string>,
  signal: AbortSignal,
): Promise<Transcript> {
  let response: Response;
  let body: unknown;
  try {
    response = await fetchImpl(url, { method: "GET", headers: { accept: "application/json", ...headers }, signal });
    if (!response.ok) throw await errorFromResponse(response);
    checkProtocol(response);
    body = await response.json();
  } catch (error) {
    if (error instanceof SyntaxError) {
      throw new ThinwireError("protocol_error", "The transcript is not JSON.", { cause: error });
    }
    throw toThinwireError(error, signal);
  }
  const turns = (body as { turns?: unknown } | null)?.turns;
  if (!Array.isArray(turns)) {
    throw new ThinwireError("protocol_error", "The transcript has no turns.");
  }
  return body as Transcript;
}

const STOP_REASONS: ReadonlySet<string> = new Set(["end", "stopped", "interrupted", "error"]);

/** Keeps the turns a UI can show; tolerant of unknown roles and missing fields. */
export function publicTurns(turns: readonly TranscriptTurn[]): TranscriptTurn[] {
  return turns
    .filter((turn) => turn.role === "user" || turn.role === "assistant")
    .map((turn) => ({
      role: turn.role,
      text: typeof turn.text === "string" ? turn.text : "",
      toolCalls: Array.isArray(turn.toolCalls) ? [...turn.toolCalls] : [],
      stopReason: STOP_REASONS.has(turn.stopReason ?? "") ? turn.stopReason : null,
    }));
}
