import { ThinwireError, toThinwireError } from "./errors.js";
import type { Frame } from "./generated/wire.js";
import { checkProtocol, errorFromResponse } from "./http.js";
import { parseSse, type SseEvent } from "./sse.js";
import type { Transport, TransportRunRequest } from "./transport.js";

export interface SseTransportOptions {
  /** Defaults to the global `fetch`, looked up at call time. */
  fetch?: typeof fetch;
}

/** POSTs a run and reads its frames from the `text/event-stream` response. */
export class SseTransport implements Transport {
  readonly #fetch: typeof fetch;

  constructor(options: SseTransportOptions = {}) {
    this.#fetch = options.fetch ?? ((input, init) => globalThis.fetch(input, init));
  }

  async *run({ url, body, headers, signal }: TransportRunRequest): AsyncGenerator<Frame> {
    let response: Response;
    try {
      response = await this.#fetch(url, {
        method: "POST",
        headers: { "content-type": "application/json", accept: "text/event-stream", ...headers },
        body: JSON.stringify(body),
        signal,
      });
    } catch (error) {
      throw toThinwireError(error, signal);
    }
    if (!response.ok) throw await errorFromResponse(response);
    checkProtocol(response);
    const contentType = response.headers.get("content-type") ?? "";
    if (!contentType.toLowerCase().startsWith("text/event-stream") || !response.body) {
      await response.body?.cancel().catch(() => undefined);
      throw new ThinwireError(
        "protocol_error",
        `Expected an event stream, got ${contentType || "no content type"}.`,
        { status: response.status },
      );
    }
    try {
      for await (const event of parseSse(response.body)) {
        yield decodeFrame(event);
      }
    } catch (error) {
      throw toThinwireError(error, signal);
    }
  }
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
  const frame = value as Frame;
  // The SSE id is the frame's seq; fill it in for a frame that left it out.
  if (typeof frame.seq !== "number" && /^\d+$/.test(event.id)) {
    return { ...frame, seq: Number(event.id) };
  }
  return frame;
}
