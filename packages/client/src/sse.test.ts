/** The SSE parser: line endings, chunk boundaries, multi-line data, ids and comments. */
import { describe, expect, it } from "vitest";
import { parseSse, SseParser, type SseEvent } from "./sse.js";

const encoder = new TextEncoder();

function streamOf(chunks: Uint8Array[]): ReadableStream<Uint8Array> {
  return new ReadableStream({
    start(controller) {
      for (const chunk of chunks) controller.enqueue(chunk);
      controller.close();
    },
  });
}

async function collect(chunks: Uint8Array[]): Promise<SseEvent[]> {
  const events: SseEvent[] = [];
  for await (const event of parseSse(streamOf(chunks))) events.push(event);
  return events;
}

const SAMPLE =
  ": heartbeat\r\n" +
  "id: 1\r\n" +
  'data: {"type":"token",\r\n' +
  'data: "delta":"caf\u00e9 \ud83d\ude00"}\r\n' +
  "\r\n" +
  "id: 2\n" +
  "data: line one\n" +
  "data:line two\n" +
  "data\n" +
  "\n" +
  ":comment only\r\r" +
  "id: 3\r" +
  "event: custom\r" +
  "data: \u00fcber\r" +
  "\r";

const EXPECTED: SseEvent[] = [
  { event: "message", data: '{"type":"token",\n"delta":"caf\u00e9 \ud83d\ude00"}', id: "1" },
  { event: "message", data: "line one\nline two\n", id: "2" },
  { event: "custom", data: "\u00fcber", id: "3" },
];

describe("parseSse", () => {
  it("parses LF, CRLF and CR line endings, comments, multi-line data and ids", async () => {
    expect(await collect([encoder.encode(SAMPLE)])).toEqual(EXPECTED);
  });

  it("gives the same events for a split at every byte position", async () => {
    const bytes = encoder.encode(SAMPLE);
    for (let cut = 0; cut <= bytes.length; cut++) {
      const events = await collect([bytes.slice(0, cut), bytes.slice(cut)]);
      expect(events, `split at byte ${cut}`).toEqual(EXPECTED);
    }
  });

  it("gives the same events when fed one byte at a time", async () => {
    const bytes = encoder.encode(SAMPLE);
    const chunks = Array.from(bytes, (byte) => Uint8Array.of(byte));
    expect(await collect(chunks)).toEqual(EXPECTED);
  });

  it("drops an event the stream did not finish", async () => {
    const events = await collect([encoder.encode("data: a\n\ndata: unfinished\n")]);
    expect(events.map((event) => event.data)).toEqual(["a"]);
  });

  it("strips a leading byte order mark and ignores events without data", async () => {
    const events = await collect([encoder.encode("\ufeffid: 7\n\nevent: x\n\ndata: ok\n\n")]);
    expect(events).toEqual([{ event: "message", data: "ok", id: "7" }]);
  });

  it("cancels the stream when the reader stops early", async () => {
    let cancelled = false;
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(encoder.encode("data: 1\n\ndata: 2\n\n"));
      },
      cancel() {
        cancelled = true;
      },
    });
    for await (const event of parseSse(stream)) {
      expect(event.data).toBe("1");
      break;
    }
    expect(cancelled).toBe(true);
  });
});

describe("SseParser", () => {
  it("holds a CR at the end of a chunk until it knows whether LF follows", () => {
    const parser = new SseParser();
    expect(parser.push("data: a\r")).toEqual([]);
    expect(parser.push("\ndata: c\r")).toEqual([]);
    expect(parser.push("\n\r\n")).toEqual([{ event: "message", data: "a\nc", id: "" }]);
    expect(parser.push("data: b\r")).toEqual([]);
    expect(parser.push("\r")).toEqual([{ event: "message", data: "b", id: "" }]);
  });
});
