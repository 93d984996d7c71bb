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
 * Regenerations and edits are runs too, answered over both wires (`POST
 * …/regenerate` and `…/edits`, or the `regenerate` and `edit` commands) and
 * remembered by `messageId` the same way. The conversation routes the client
 * calls over HTTP — the list (`GET …/contexts`), a rename (`PATCH`), a forget
 * (`DELETE`) and a branch switch (`POST …/branch`) — are the script's too,
 * as is a clear (`POST …/clear`, which a test makes as another tab would),
 * and so is a transcript: its query (`limit`, `before`) asks for a page.
 * `conversationScript()` (`conversation-script.ts`) is a script that keeps
 * conversations as the server does, branches and pages and all.
 *
 * It issues WebSocket tickets too (`POST …/tickets`, from the fake `fetch`):
 * a socket opened at `…/ws?ticket=…` with a ticket it did not issue, or one
 * used before, is closed with 4401 (`unauthenticated`) once open, as the real
 * server does; with `requireTicket`, so is a socket without one.
 */
import {
  type BranchRequest,
  type Command,
  type ConversationPage,
  type ConversationSummary,
  type DecisionRequest,
  type EditRequest,
  type Frame,
  type RegenerateRequest,
  type RejectedFrame,
  type RenameRequest,
  RETRYABLE_CODES,
  type RunRequest,
  type StopResult,
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

/** An HTTP refusal of a request answered with JSON: a ticket, a page of the list, a rename, a forget, a branch. */
export interface Refusal {
  error: { status: number; code: string; message: string; retryable?: boolean };
}

/** A refusal of a ticket request. */
export type TicketRefusal = Refusal;

/** The query of `GET …/contexts`. */
export interface ConversationQuery {
  limit: number;
  cursor: string | null;
}

/** The query of a transcript (`GET …/contexts/{id}`, `POST …/branch`): which page of it. */
export interface TranscriptQuery {
  /** The last this many exchanges; null for all of them. */
  limit: number | null;
  /** Those before the exchange of this turn, along its branch; null for the branch shown. */
  before: string | null;
}

export interface Script {
  /** A send; not called for a repeat of a `messageId` that started a run (see above). */
  run(body: RunRequest): Reply;
  attach?(contextId: string, after: number): Reply;
  /** Defaults to `interrupt_not_found`. */
  decide?(contextId: string, decision: DecisionRequest): Reply;
  /** Defaults to `nothing_to_regenerate`. Not called for a repeat of a `messageId` that started a run. */
  regenerate?(contextId: string, request: RegenerateRequest): Reply;
  /** Defaults to `turn_not_found`. Not called for a repeat of a `messageId` that started a run. */
  edit?(contextId: string, request: EditRequest): Reply;
  /** The answer over HTTP, if not `stopping` true (a WebSocket answers none). */
  stop?(contextId: string): StopResult | void;
  /** `GET …/contexts/{id}`: undefined for `context_not_found`; without a query, the whole transcript. */
  transcript?(contextId: string, query?: TranscriptQuery): Transcript | Refusal | undefined;
  /** `POST …/branch`: the transcript of that branch; defaults to `branch_not_found`. */
  branch?(contextId: string, request: BranchRequest, query?: TranscriptQuery): Transcript | Refusal;
  /** `GET …/contexts`: a page of the caller's conversations; defaults to none. */
  conversations?(query: ConversationQuery): ConversationPage | Refusal;
  /** `PATCH …/contexts/{id}`; defaults to `context_not_found`. */
  rename?(contextId: string, request: RenameRequest): ConversationSummary | Refusal;
  /** `DELETE …/contexts/{id}` (answered with 204); defaults to `context_not_found`. */
  forget?(contextId: string): Refusal | void;
  /** `POST …/contexts/{id}/clear`: the transcript left; defaults to `context_not_found`. */
  clear?(contextId: string): Transcript | Refusal;
  /** `POST …/tickets`, with the request's headers: a refusal, or nothing to issue a ticket (the default). */
  ticket?(headers: Headers): TicketRefusal | void;
  /** Refuse a socket without a ticket (4401), as a server that identifies callers by a header must. */
  requireTicket?: boolean;
  /**
   * Refuse every socket at the handshake, as the server does a page of a foreign
   * origin (HTTP 403): a browser sees only a close with 1006, before the socket opened.
   */
  refuseHandshake?: boolean;
}

export interface ServerLog {
  /** Every send as the server got it, repeats included. */
  runs: RunRequest[];
  attaches: Array<{ contextId: string; after: number }>;
  decisions: Array<{ contextId: string } & DecisionRequest>;
  /** Every regeneration and edit as the server got it, repeats included. */
  regenerations: Array<{ contextId: string } & RegenerateRequest>;
  edits: Array<{ contextId: string } & EditRequest>;
  branches: Array<{ contextId: string } & BranchRequest>;
  stops: string[];
  transcripts: string[];
  /** Every `GET …/contexts`. */
  listings: ConversationQuery[];
  renames: Array<{ contextId: string } & RenameRequest>;
  forgets: string[];
  clears: string[];
  /** The headers of every ticket request (names in lower case). */
  tickets: Array<Record<string, string>>;
}

export function newLog(): ServerLog {
  return {
    runs: [],
    attaches: [],
    decisions: [],
    regenerations: [],
    edits: [],
    branches: [],
    stops: [],
    transcripts: [],
    listings: [],
    renames: [],
    forgets: [],
    clears: [],
    tickets: [],
  };
}

const encoder = new TextEncoder();
const NOTHING_PENDING: Reply = { error: { status: 404, code: "interrupt_not_found", message: "No such interrupt." } };
const NOTHING_TO_REGENERATE: Reply = {
  error: { status: 409, code: "nothing_to_regenerate", message: "The conversation has no reply to regenerate." },
};
const NO_TURN: Reply = { error: { status: 404, code: "turn_not_found", message: "No such turn." } };
const NO_CONTEXT: Refusal = { error: { status: 404, code: "context_not_found", message: "Unknown context." } };
const NO_BRANCH: Refusal = { error: { status: 404, code: "branch_not_found", message: "No such branch." } };
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
  // Known per conversation; a new conversation's id is known among the server's new conversations.
  return remembered(script, `${body.contextId ?? ""}|${body.messageId}`, body.messageId, () => script.run(body));
}

function answerRegenerate(script: Script, contextId: string, body: RegenerateRequest): Reply {
  const answer = () => script.regenerate?.(contextId, body) ?? NOTHING_TO_REGENERATE;
  return remembered(script, `regenerate|${contextId}|${body.messageId}`, body.messageId, answer);
}

function answerEdit(script: Script, contextId: string, body: EditRequest): Reply {
  const answer = () => script.edit?.(contextId, body) ?? NO_TURN;
  return remembered(script, `edit|${contextId}|${body.messageId}`, body.messageId, answer);
}

/** The run a request with a known `messageId` started, replayed from its start; else `answer()`, remembered when it starts a run. */
function remembered(script: Script, key: string, messageId: string | null | undefined, answer: () => Reply): Reply {
  if (typeof messageId !== "string") return answer();
  let runs = startedRuns.get(script);
  if (!runs) startedRuns.set(script, (runs = new Map()));
  const known = runs.get(key);
  if (known) return { frames: known.replay() };
  const reply = answer();
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

/** A JSON answer, or the refusal the script made instead. */
function answerJson(answer: object): Response {
  if ("error" in answer) {
    const { error } = answer as Refusal;
    return json(error.status, { error: { retryable: RETRYABLE_CODES.has(error.code), ...error } });
  }
  return json(200, answer);
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
    } else if (path === "/contexts" && method === "GET") {
      const query = { limit: Number(url.searchParams.get("limit") ?? 20), cursor: url.searchParams.get("cursor") };
      log.listings.push(query);
      return answerJson(script.conversations?.(query) ?? { conversations: [], nextCursor: null });
    } else {
      const match = /^\/contexts\/([^/]+)(\/events|\/stop|\/decisions|\/regenerate|\/edits|\/branch|\/clear)?$/.exec(path);
      if (!match) return json(404, { error: { code: "not_found", message: "No route." } });
      const contextId = decodeURIComponent(match[1]!);
      const body = () => JSON.parse(String(init?.body)) as unknown;
      if (match[2] === "/decisions" && method === "POST") {
        const decision = body() as DecisionRequest;
        log.decisions.push({ contextId, ...decision });
        reply = script.decide?.(contextId, decision) ?? NOTHING_PENDING;
      } else if (match[2] === "/regenerate" && method === "POST") {
        const request = body() as RegenerateRequest;
        log.regenerations.push({ contextId, ...request });
        reply = answerRegenerate(script, contextId, request);
      } else if (match[2] === "/edits" && method === "POST") {
        const request = body() as EditRequest;
        log.edits.push({ contextId, ...request });
        reply = answerEdit(script, contextId, request);
      } else if (match[2] === "/branch" && method === "POST") {
        const request = body() as BranchRequest;
        log.branches.push({ contextId, ...request });
        return answerJson(script.branch?.(contextId, request, transcriptQuery(url)) ?? NO_BRANCH);
      } else if (match[2] === "/clear" && method === "POST") {
        log.clears.push(contextId);
        return answerJson(script.clear?.(contextId) ?? NO_CONTEXT);
      } else if (match[2] === "/stop") {
        log.stops.push(contextId);
        return json(200, script.stop?.(contextId) ?? { contextId, runId: null, stopping: true });
      } else if (match[2] === "/events") {
        const after = Number(headers.get("Last-Event-ID") ?? url.searchParams.get("after") ?? 0);
        log.attaches.push({ contextId, after });
        reply = script.attach?.(contextId, after) ?? { nothing: true };
      } else if (method === "PATCH") {
        const request = body() as RenameRequest;
        log.renames.push({ contextId, ...request });
        return answerJson(script.rename?.(contextId, request) ?? NO_CONTEXT);
      } else if (method === "DELETE") {
        log.forgets.push(contextId);
        const refusal = script.forget ? script.forget(contextId) : NO_CONTEXT;
        return refusal ? answerJson(refusal) : new Response(null, { status: 204 });
      } else {
        log.transcripts.push(contextId);
        return answerJson(script.transcript?.(contextId, transcriptQuery(url)) ?? NO_CONTEXT);
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
      start(controller) {
        // As fetch does: a request aborted while its body is read fails the read.
        init?.signal?.addEventListener("abort", () => controller.error(new DOMException("Aborted.", "AbortError")), {
          once: true,
        });
      },
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

/** The page a transcript request asks for. */
function transcriptQuery(url: URL): TranscriptQuery {
  const limit = url.searchParams.get("limit");
  return { limit: limit === null ? null : Number(limit), before: url.searchParams.get("before") };
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
          if (command.afterTurnId != null) body.afterTurnId = command.afterTurnId;
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
        case "regenerate": {
          const request: RegenerateRequest = command.messageId == null ? {} : { messageId: command.messageId };
          if (command.turnId != null) request.turnId = command.turnId;
          log.regenerations.push({ contextId: command.contextId, ...request });
          void this.#answer(answerRegenerate(script, command.contextId, request), command);
          break;
        }
        case "edit": {
          const request: EditRequest = { turnId: command.turnId, message: command.message };
          if (command.messageId != null) request.messageId = command.messageId;
          if (command.data != null) request.data = command.data;
          log.edits.push({ contextId: command.contextId, ...request });
          void this.#answer(answerEdit(script, command.contextId, request), command);
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
      // The run_start of the run a command started names the command.
      let echo = command.type !== "attach" && command.type !== "stop";
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
