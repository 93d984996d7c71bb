/**
 * A fake thinwire server for tests: one script that answers over both wires —
 * a fake `fetch` speaking SSE and a fake `WebSocket` class — so a behaviour
 * test can run unchanged over either transport. Like the real server, the
 * WebSocket one echoes a command's `requestId` in the `run_start` of the run
 * it started and in the `rejected` that refuses it.
 *
 * Like the real server too, it remembers the `messageId` of every send that
 * started a run (per conversation; per server for new conversations): a send
 * repeating one starts nothing — `script.run` is not called — and streams the
 * run the first one started, from its start. Both wires made from one script
 * are one server and share that memory.
 *
 * It issues WebSocket tickets too (`POST …/tickets`, from the fake `fetch`):
 * a socket opened at `…/ws?ticket=…` with a ticket it did not issue, or one
 * used before, is closed with 4401 (`unauthenticated`) once open, as the real
 * server does; with `requireTicket`, so is a socket without one.
 */
import {
  type Command,
  type DecisionRequest,
  type Frame,
  type RejectedFrame,
  RETRYABLE_CODES,
  type RunRequest,
  type Transcript,
} from "../generated/wire.js";

/** How the server answers one run, decision or attach. */
export type Reply =
  /**
   * These frames; with `cut`, the connection then drops (no clean end). With
   * `cutAfter`, it drops once that many frames went out — 0: before the first,
   * so the response never starts (a fetch rejects) although the run did.
   */
  | { frames: Iterable<Frame> | AsyncIterable<Frame>; cut?: boolean; cutAfter?: number }
  /** The connection drops before the request reaches the server: nothing runs, nothing is remembered. */
  | { lost: true }
  /** A refusal: an HTTP error body, or a WebSocket `rejected` frame (`retryable` as the code is by default). */
  | { error: { status: number; code: string; message: string; retryable?: boolean; interruptId?: string } }
  /** Nothing to follow: HTTP 204, WebSocket `no_run`. */
  | { nothing: true };

/** A refusal of a ticket request. */
export interface TicketRefusal {
  error: { status: number; code: string; message: string; retryable?: boolean };
}

export interface Script {
  /** A send; not called for a repeat of a `messageId` that started a run (see above). */
  run(body: RunRequest): Reply;
  attach?(contextId: string, after: number): Reply;
  /** Defaults to `interrupt_not_found`. */
  decide?(contextId: string, decision: DecisionRequest): Reply;
  stop?(contextId: string): void;
  transcript?(contextId: string): Transcript | undefined;
  /** `POST …/tickets`, with the request's headers: a refusal, or nothing to issue a ticket (the default). */
  ticket?(headers: Headers): TicketRefusal | void;
  /** Refuse a socket without a ticket (4401), as a server that identifies callers by a header must. */
  requireTicket?: boolean;
  /**
   * Refuse every socket at the handshake, as the server does a page of a foreign
   * origin (4403): a browser sees only a close with 1006, before the socket opened.
   */
  refuseHandshake?: boolean;
}

export interface ServerLog {
  /** Every send as the server got it, repeats included. */
  runs: RunRequest[];
  attaches: Array<{ contextId: string; after: number }>;
  decisions: Array<{ contextId: string } & DecisionRequest>;
  stops: string[];
  transcripts: string[];
  /** The headers of every ticket request (names in lower case). */
  tickets: Array<Record<string, string>>;
}

export function newLog(): ServerLog {
  return { runs: [], attaches: [], decisions: [], stops: [], transcripts: [], tickets: [] };
}

const encoder = new TextEncoder();
const NOTHING_PENDING: Reply = { error: { status: 404, code: "interrupt_not_found", message: "No such interrupt." } };
const tick = () => new Promise<void>((resolve) => setTimeout(resolve, 0));

/** The runs each script (each server) started, by the `messageId` of the send that started them. */
const startedRuns = new WeakMap<Script, Map<string, RecordedRun>>();

/** The tickets each script (each server) issued, and whether each was used. */
const issuedTickets = new WeakMap<Script, Map<string, boolean>>();

function ticketsOf(script: Script): Map<string, boolean> {
  let tickets = issuedTickets.get(script);
  if (!tickets) issuedTickets.set(script, (tickets = new Map()));
  return tickets;
}

/** Whether a socket opened at `url` may stay open: its ticket is one the server issued and not used yet. */
function admits(script: Script, url: string): boolean {
  const ticket = new URL(url, "ws://server.test").searchParams.get("ticket");
  if (ticket === null) return !script.requireTicket;
  const tickets = ticketsOf(script);
  if (tickets.get(ticket) !== false) return false;
  tickets.set(ticket, true);
  return true;
}

/** How the server answers a send: the run a known `messageId` started, or what the script says. */
function answerSend(script: Script, body: RunRequest): Reply {
  if (typeof body.messageId !== "string") return script.run(body);
  let runs = startedRuns.get(script);
  if (!runs) startedRuns.set(script, (runs = new Map()));
  // Known per conversation; a new conversation's id is known among the server's new conversations.
  const key = `${body.contextId ?? ""}|${body.messageId}`;
  const known = runs.get(key);
  if (known) return { frames: known.replay() };
  const reply = script.run(body);
  if (!("frames" in reply)) return reply;
  const run = new RecordedRun(reply.frames);
  runs.set(key, run);
  return { ...reply, frames: run.replay() };
}

/**
 * The frames of a run as the server keeps them: read from the script once, as
 * the first reader needs them, and replayed from the start to every other.
 */
class RecordedRun {
  readonly #frames: Frame[] = [];
  readonly #source: AsyncIterator<Frame>;
  #pulling: Promise<void> | null = null;
  #over = false;

  constructor(frames: Iterable<Frame> | AsyncIterable<Frame>) {
    this.#source = toAsync(frames)[Symbol.asyncIterator]();
  }

  async *replay(): AsyncGenerator<Frame> {
    for (let index = 0; ; index++) {
      while (index >= this.#frames.length) {
        if (this.#over) return;
        await this.#pull();
      }
      yield this.#frames[index]!;
    }
  }

  /** One read of the source at a time, whoever asks. */
  #pull(): Promise<void> {
    this.#pulling ??= this.#source.next().then(
      (step) => {
        this.#pulling = null;
        if (step.done) this.#over = true;
        else this.#frames.push(step.value);
      },
      (error: unknown) => {
        this.#pulling = null;
        throw error;
      },
    );
    return this.#pulling;
  }
}

function json(status: number, body: unknown): Response {
  return new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } });
}

/** A `fetch` that serves the script over HTTP + SSE. */
export function fakeFetch(script: Script, log: ServerLog): typeof fetch {
  return async (input, init) => {
    const url = new URL(String(input), "http://server.test");
    const method = init?.method ?? "GET";
    const path = url.pathname.replace(/^.*\/agents\/[^/]+/, "");
    const headers = new Headers(init?.headers);
    let reply: Reply;
    if (path === "/tickets" && method === "POST") {
      log.tickets.push(Object.fromEntries(headers.entries()));
      const refusal = script.ticket?.(headers);
      if (refusal) return json(refusal.error.status, { error: { retryable: false, ...refusal.error } });
      const tickets = ticketsOf(script);
      const ticket = `ticket-${tickets.size + 1}`;
      tickets.set(ticket, false);
      return json(200, { ticket, expiresIn: 60 });
    }
    if (path === "/runs" && method === "POST") {
      const body = JSON.parse(String(init?.body)) as RunRequest;
      log.runs.push(body);
      reply = answerSend(script, body);
    } else {
      const match = /^\/contexts\/([^/]+)(\/events|\/stop|\/decisions)?$/.exec(path);
      if (!match) return json(404, { error: { code: "not_found", message: "No route." } });
      const contextId = decodeURIComponent(match[1]!);
      if (match[2] === "/decisions" && method === "POST") {
        const decision = JSON.parse(String(init?.body)) as DecisionRequest;
        log.decisions.push({ contextId, ...decision });
        reply = script.decide?.(contextId, decision) ?? NOTHING_PENDING;
      } else if (match[2] === "/stop") {
        log.stops.push(contextId);
        script.stop?.(contextId);
        return json(200, { contextId, runId: null, stopping: true });
      } else if (match[2] === "/events") {
        const after = Number(headers.get("Last-Event-ID") ?? url.searchParams.get("after") ?? 0);
        log.attaches.push({ contextId, after });
        reply = script.attach?.(contextId, after) ?? { nothing: true };
      } else {
        log.transcripts.push(contextId);
        const transcript = script.transcript?.(contextId);
        if (!transcript) return json(404, { error: { code: "context_not_found", message: "Unknown context." } });
        return json(200, transcript);
      }
    }
    if ("error" in reply) {
      const { status, ...detail } = reply.error;
      return json(status, { error: { retryable: RETRYABLE_CODES.has(detail.code), ...detail } });
    }
    if ("nothing" in reply) return new Response(null, { status: 204 });
    // A response that never starts: fetch rejects, as it does when the connection drops.
    if ("lost" in reply || reply.cutAfter === 0) throw new TypeError("network connection lost");
    const { frames, cut, cutAfter } = reply;
    const iterator = toAsync(frames)[Symbol.asyncIterator]();
    let sent = 0;
    const body = new ReadableStream<Uint8Array>({
      async pull(controller) {
        if (cutAfter !== undefined && sent >= cutAfter) {
          controller.error(new TypeError("network connection lost"));
          return;
        }
        sent += 1;
        const step = await iterator.next();
        if (step.done) {
          if (cut) controller.error(new TypeError("network connection lost"));
          else controller.close();
          return;
        }
        const frame = step.value as { seq?: number };
        controller.enqueue(encoder.encode(`id: ${frame.seq ?? ""}\ndata: ${JSON.stringify(frame)}\n\n`));
      },
    });
    return new Response(body, { status: 200, headers: { "content-type": "text/event-stream" } });
  };
}

async function* toAsync(frames: Iterable<Frame> | AsyncIterable<Frame>): AsyncGenerator<Frame> {
  yield* frames;
}

export interface FakeSocket {
  readonly url: string;
  readonly protocols: string[];
  readonly sent: Command[];
  readyState: number;
  /** The server drops the connection. */
  drop(code?: number, reason?: string): void;
  /** The server sends a raw text message. */
  receive(data: string): void;
}

/** A `WebSocket` class that serves the script over the thinwire WebSocket protocol. */
export function fakeWebSocket(script: Script, log: ServerLog) {
  const sockets: FakeSocket[] = [];

  class FakeWebSocket implements FakeSocket {
    readonly url: string;
    readonly protocols: string[];
    readonly sent: Command[] = [];
    readyState = 0;
    onopen: ((event: Event) => void) | null = null;
    onmessage: ((event: MessageEvent) => void) | null = null;
    onclose: ((event: CloseEvent) => void) | null = null;
    onerror: ((event: Event) => void) | null = null;

    constructor(url: string, protocols?: string | string[]) {
      this.url = url;
      this.protocols = protocols === undefined ? [] : Array.isArray(protocols) ? protocols : [protocols];
      sockets.push(this);
      const admitted = admits(script, url);
      setTimeout(() => {
        if (this.readyState !== 0) return;
        if (script.refuseHandshake) {
          this.drop(1006);
          return;
        }
        this.readyState = 1;
        this.onopen?.(new Event("open"));
        if (!admitted) this.drop(4401, "unauthenticated");
      }, 0);
    }

    send(data: string): void {
      if (this.readyState !== 1) throw new Error("InvalidStateError: not open");
      const command = JSON.parse(data) as Command;
      this.sent.push(command);
      switch (command.type) {
        case "send": {
          const body: RunRequest = { message: command.message };
          if (command.contextId != null) body.contextId = command.contextId;
          if (command.messageId != null) body.messageId = command.messageId;
          if (command.data != null) body.data = command.data;
          log.runs.push(body);
          void this.#answer(answerSend(script, body), command);
          break;
        }
        case "attach": {
          const after = command.after ?? 0;
          log.attaches.push({ contextId: command.contextId, after });
          void this.#answer(script.attach?.(command.contextId, after) ?? { nothing: true }, command);
          break;
        }
        case "decide": {
          const decision: DecisionRequest = { interruptId: command.interruptId, value: command.value };
          log.decisions.push({ contextId: command.contextId, ...decision });
          void this.#answer(script.decide?.(command.contextId, decision) ?? NOTHING_PENDING, command);
          break;
        }
        case "stop":
          log.stops.push(command.contextId);
          script.stop?.(command.contextId);
          break;
      }
    }

    close(code = 1000, reason = ""): void {
      if (this.readyState >= 2) return;
      this.readyState = 2;
      setTimeout(() => this.#closed(code, reason), 0);
    }

    drop(code = 1006, reason = ""): void {
      if (this.readyState >= 2) return;
      this.#closed(code, reason);
    }

    receive(data: string): void {
      this.onmessage?.(new MessageEvent("message", { data }));
    }

    #closed(code: number, reason: string): void {
      this.readyState = 3;
      this.onclose?.({ code, reason, wasClean: code === 1000 } as CloseEvent);
    }

    async #answer(reply: Reply, command: Command): Promise<void> {
      await tick();
      const requestId = command.requestId ?? null;
      if ("lost" in reply || ("frames" in reply && reply.cutAfter === 0)) {
        this.drop();
        return;
      }
      if ("error" in reply || "nothing" in reply) {
        const error = "error" in reply ? reply.error : null;
        const code = error?.code ?? "no_run";
        const rejected: RejectedFrame = {
          type: "rejected",
          code,
          message: error?.message ?? "Nothing to follow.",
          retryable: error?.retryable ?? RETRYABLE_CODES.has(code),
          command: command.type,
          contextId: command.contextId ?? null,
          requestId,
          interruptId: error?.interruptId ?? null,
        };
        this.receive(JSON.stringify(rejected));
        return;
      }
      // The run_start of the run a send or decide started names the command.
      let echo = command.type === "send" || command.type === "decide";
      let count = 0;
      for await (const frame of reply.frames) {
        if (this.readyState !== 1) return;
        if (reply.cutAfter !== undefined && count >= reply.cutAfter) {
          this.drop();
          return;
        }
        const sent = echo && frame.type === "run_start" ? { ...frame, requestId } : frame;
        if (sent !== frame) echo = false;
        this.receive(JSON.stringify(sent));
        count += 1;
        await tick();
      }
      if (reply.cut) this.drop();
    }
  }

  return { WebSocket: FakeWebSocket as unknown as typeof WebSocket, sockets };
}
