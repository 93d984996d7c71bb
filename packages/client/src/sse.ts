/**
 * A Server-Sent Events parser (the WHATWG `text/event-stream` rules).
 *
 * `SseParser` is incremental over text; `parseSse` drives it from a byte stream.
 * Chunks may split anywhere: inside a line, between CR and LF, or inside a
 * multi-byte UTF-8 character (the streaming TextDecoder keeps the partial bytes).
 * `event:` and `retry:` are parsed but thinwire does not use them: a frame's
 * kind is its JSON `type`.
 */

export interface SseEvent {
  /** The `event:` field, `"message"` when absent. */
  event: string;
  /** The `data:` lines joined by `\n`. */
  data: string;
  /** The last `id:` seen so far in the stream (the SSE "last event id"). */
  id: string;
}

export class SseParser {
  #buffer = "";
  #skipLeadingLf = false;
  #started = false;
  #data: string[] = [];
  #event = "";
  #lastId = "";

  /** Feeds decoded text; returns the events completed by it. */
  push(text: string): SseEvent[] {
    if (!this.#started && text.length > 0) {
      this.#started = true;
      if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
    }
    if (this.#skipLeadingLf && text.length > 0) {
      this.#skipLeadingLf = false;
      if (text[0] === "\n") text = text.slice(1);
    }
    this.#buffer += text;
    const events: SseEvent[] = [];
    let start = 0;
    for (let i = 0; i < this.#buffer.length; i++) {
      const char = this.#buffer[i];
      if (char !== "\n" && char !== "\r") continue;
      const line = this.#buffer.slice(start, i);
      if (char === "\r") {
        if (i + 1 < this.#buffer.length) {
          if (this.#buffer[i + 1] === "\n") i++;
        } else {
          // A CR at the end of the chunk: its LF, if any, arrives next.
          this.#skipLeadingLf = true;
        }
      }
      start = i + 1;
      const event = this.#line(line);
      if (event) events.push(event);
    }
    this.#buffer = this.#buffer.slice(start);
    return events;
  }

  #line(line: string): SseEvent | null {
    if (line === "") return this.#dispatch();
    if (line.startsWith(":")) return null; // comment or heartbeat
    const colon = line.indexOf(":");
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    switch (field) {
      case "data":
        this.#data.push(value);
        break;
      case "event":
        this.#event = value;
        break;
      case "id":
        if (!value.includes("\0")) this.#lastId = value;
        break;
      default:
        break; // `retry` and unknown fields
    }
    return null;
  }

  #dispatch(): SseEvent | null {
    const data = this.#data;
    const event = this.#event;
    this.#data = [];
    this.#event = "";
    if (data.length === 0) return null;
    return { event: event || "message", data: data.join("\n"), id: this.#lastId };
  }
}

/**
 * Yields the events of a `text/event-stream` body. An event not ended by a blank
 * line when the stream closes is dropped, as the standard says. Breaking out of
 * the loop cancels the stream. `heard` is called with every chunk read, a
 * heartbeat's too (which yields no event).
 */
export async function* parseSse(stream: ReadableStream<Uint8Array>, heard?: () => void): AsyncGenerator<SseEvent> {
  const reader = stream.getReader();
  const decoder = new TextDecoder("utf-8");
  const parser = new SseParser();
  let finished = false;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) {
        finished = true;
        yield* parser.push(decoder.decode());
        return;
      }
      heard?.();
      yield* parser.push(decoder.decode(value, { stream: true }));
    }
  } finally {
    if (!finished) await reader.cancel().catch(() => undefined);
    reader.releaseLock();
  }
}
