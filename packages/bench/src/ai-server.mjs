// The Vercel AI SDK server under test: `streamText` over the SDK's own mock language
// model, answered as a UI message stream on plain `node:http`, as a TypeScript user would
// write it. Delta i is "w{i} ", the same text every server in `make bench` streams.
//
//   node src/ai-server.mjs --port 8123 [--host 127.0.0.1]
//   POST /chat {"deltas": 200, "pace": "burst"}  ->  text/event-stream (UI message stream)
//
// `pace` is how the model hands its deltas over, as in the Python servers: "burst" (no
// pause), "yield" (one event-loop turn between deltas: setImmediate) or a number of
// seconds between them.
import http from "node:http";
import { parseArgs } from "node:util";

import { simulateReadableStream, streamText } from "ai";
import { MockLanguageModelV4 } from "ai/test";

const { values } = parseArgs({
  options: { port: { type: "string" }, host: { type: "string", default: "127.0.0.1" } },
});

function chunks(count) {
  const parts = [{ type: "stream-start", warnings: [] }, { type: "text-start", id: "text-1" }];
  for (let i = 0; i < count; i++) parts.push({ type: "text-delta", id: "text-1", delta: `w${i} ` });
  parts.push({ type: "text-end", id: "text-1" });
  parts.push({
    type: "finish",
    finishReason: { unified: "stop", raw: "stop" },
    usage: {
      inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
      outputTokens: { total: count, text: count, reasoning: 0 },
    },
  });
  return parts;
}

function paced(parts, pace) {
  if (pace === "yield") {
    return new ReadableStream({
      async start(controller) {
        for (const part of parts) {
          controller.enqueue(part);
          await new Promise((resolve) => setImmediate(resolve));
        }
        controller.close();
      },
    });
  }
  // A burst: no delays, as fast as the SDK can go; or so many seconds between deltas.
  const delay = pace === "burst" ? null : Number(pace) * 1000;
  return simulateReadableStream({ chunks: parts, initialDelayInMs: null, chunkDelayInMs: delay });
}

const model = new MockLanguageModelV4({
  doStream: async (options) => {
    const bench = options.providerOptions?.bench ?? {};
    return { stream: paced(chunks(bench.deltas ?? 200), bench.pace ?? "burst") };
  },
});

async function readJson(request) {
  let body = "";
  for await (const piece of request) body += piece;
  return body ? JSON.parse(body) : {};
}

const server = http.createServer(async (request, response) => {
  if (request.method === "GET" && request.url === "/healthz") {
    response.writeHead(200, { "content-type": "application/json" }).end('{"ok":true}');
    return;
  }
  if (request.method !== "POST" || request.url !== "/chat") {
    response.writeHead(404).end();
    return;
  }
  const body = await readJson(request);
  const result = streamText({
    model,
    prompt: "go",
    providerOptions: {
      bench: { deltas: Number(body.deltas ?? 200), pace: String(body.pace ?? "burst") },
    },
  });
  result.pipeUIMessageStreamToResponse(response);
});
server.keepAliveTimeout = 5000;
server.listen(Number(values.port), values.host, () => {
  process.stdout.write(`listening on ${values.host}:${values.port}\n`);
});
for (const signal of ["SIGTERM", "SIGINT"]) {
  process.on(signal, () => {
    server.closeAllConnections();
    server.close(() => process.exit(0));
  });
}
