/** What a `send()` may carry besides its text. */
import { ThinwireError } from "./errors.js";

export interface SendOptions {
  /**
   * Extra public input for the agent (the page the user is on, an item they
   * selected): a JSON object, sent with the message as the request's `data`
   * and handed to the agent as `run.data`. It comes from the browser, so the
   * agent treats it as untrusted, like the text. The server limits its size
   * (`data_too_large` beyond). A repeat of the send carries the same data.
   */
  data?: Record<string, unknown> | undefined;
}

/**
 * The data as it goes on the wire: a copy made at send time (so every try of
 * the message carries the same), or a ThinwireError when it is not a JSON object.
 */
export function requestData(data: unknown): Record<string, unknown> | ThinwireError {
  const refusal = new ThinwireError("invalid_request", "data must be a JSON object.");
  if (typeof data !== "object" || data === null || Array.isArray(data)) return refusal;
  let copy: unknown;
  try {
    copy = JSON.parse(JSON.stringify(data));
  } catch (error) {
    return new ThinwireError("invalid_request", "data must be a JSON object.", { cause: error });
  }
  if (typeof copy !== "object" || copy === null || Array.isArray(copy)) return refusal; // a toJSON that said otherwise
  return copy as Record<string, unknown>;
}
