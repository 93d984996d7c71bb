/**
 * Property tests of the frame parser (fast-check): whatever the text and however the
 * bytes are cut, frames round-trip exactly; garbage never escapes as anything but a
 * typed ThinwireError.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ThinwireError } from "./errors.js";
import type { Frame, RunRequest } from "./generated/wire.js";
import { SseTransport } from "./sse-transport.js";
import { parseSse } from "./sse.js";

const encoder = new TextEncoder();

/** A response whose body arrives in the given byte chunks. */
function streamOf(bytes: Uint8Array, cuts: number[]): ReadableStream<Uint8Array> {
  const points = [...new Set(cuts.map((cut) => cut % (bytes.length + 1)))].sort((a, b) => a - b);
  return new ReadableStream({
    start(controller) {
      let from = 0;
      for (const point of [...points, bytes.length]) {
        if (point > from) controller.enqueue(bytes.slice(from, point));
        from = point;
      }
      controller.close();
    },
  });
}

async function collect<T>(items: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of items) out.push(item);
  return out;
}

/** Encodes frames as the server does, with heartbeats and either line ending. */
function encode(deltas: string[], newline: string, heartbeats: boolean): string {
  return deltas
    .map((delta, index) => {
      const frame = { contextId: "ctx-1", runId: "run-1", seq: index + 1, type: "token", delta };
      const beat = heartbeats ? `: heartbeat${newline}${newline}` : "";
      return `${beat}id: ${index + 1}${newline}data: ${JSON.stringify(frame)}${newline}${newline}`;
    })
    .join("");
}

const deltas = fc.array(fc.string({ unit: "binary", maxLength: 40 }), { maxLength: 12 });
const cuts = fc.array(fc.nat(), { maxLength: 20 });

describe("the SSE frame parser", () => {
  it("round-trips any text, cut into any chunks, with either line ending", async () => {
    await fc.assert(
      fc.asyncProperty(deltas, cuts, fc.constantFrom("\n", "\r\n", "\r"), fc.boolean(), async (texts, at, newline, beats) => {
        const bytes = encoder.encode(encode(texts, newline, beats));
        const events = await collect(parseSse(streamOf(bytes, at)));
        expect(events.map((event) => JSON.parse(event.data).delta)).toEqual(
          // What TextEncoder can carry: lone surrogates become U+FFFD, as on the server.
          texts.map((text) => new TextDecoder().decode(encoder.encode(text))),
        );
        expect(events.map((event) => event.id)).toEqual(texts.map((_, index) => String(index + 1)));
      }),
      { numRuns: 300 },
    );
  });

  it("turns any garbage into frames or a typed ThinwireError, nothing else", async () => {
    const request = {
      baseUrl: "",
      agent: "demo",
      headers: {},
      body: { message: { text: "hi" } } as RunRequest,
      signal: new AbortController().signal,
    };
    await fc.assert(
      fc.asyncProperty(fc.uint8Array({ maxLength: 400 }), cuts, async (garbage, at) => {
        const transport = new SseTransport({
          fetch: async () =>
            new Response(streamOf(garbage, at), { headers: { "content-type": "text/event-stream" } }),
        });
        try {
          const frames: Frame[] = await collect(transport.run(request));
          for (const frame of frames) expect(typeof frame.type).toBe("string");
        } catch (error) {
          expect(error).toBeInstanceOf(ThinwireError);
        }
      }),
      { numRuns: 300 },
    );
  });
});
