/** HTTP responses: the typed error of a refusal, and the protocol check every response gets. */
import { serverError, ThinwireError } from "./errors.js";
import { PROTOCOL_HEADER, PROTOCOL_VERSION, RETRYABLE_CODES } from "./generated/wire.js";

/**
 * Builds the typed error for a non-2xx response from its `{"error": {code, message, retryable}}`
 * body. A body without `retryable` (an older server, a proxy's page) is judged by its code and status.
 */
export async function errorFromResponse(response: Response): Promise<ThinwireError> {
  const status = response.status;
  let code = "http_error";
  let message = `HTTP ${status}${response.statusText ? ` ${response.statusText}` : ""}`;
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
