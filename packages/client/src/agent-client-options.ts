/** The options of an AgentClient: where it talks to, how, and whom it tells what happened. */
import type { ThinwireError } from "./errors.js";
import type { CredentialsMode } from "./http.js";
import type { Schedule } from "./notifier.js";
import type { ReconnectOptions } from "./reconnect.js";
import type { SendResult } from "./send-result.js";
import type { AgentErrorInfo } from "./snapshot.js";
import type { Transport } from "./transport.js";

export interface AgentClientOptions {
  /** The agent's name, as mounted on the server. */
  agent: string;
  /**
   * Prefix of the thinwire routes, e.g. `"/api"`; defaults to the page origin.
   * Absolute where there is no page (Node.js): there a relative one fails
   * every request at once with `invalid_url`, unless a `fetch` of your own
   * resolves it. An absolute one starts `http://` or `https://`; one no
   * request could use throws a TypeError here.
   */
  baseUrl?: string | undefined;
  /**
   * Resume this conversation: `start()` loads its transcript and follows a run
   * in progress. An id the server does not know, or not shaped like its ids
   * (`ctx-` and 36 lowercase hex digits), is forgotten.
   */
  contextId?: string | null | undefined;
  /**
   * Exchanges (a user message and its reply) per page of a transcript: a
   * conversation is loaded with its last `pageSize` exchanges, and
   * `loadEarlier()` shows the page before. A whole number from 1 to 1000
   * (default 50), or `Infinity` for the whole transcript at once; anything
   * else throws a TypeError here.
   */
  pageSize?: number | undefined;
  /**
   * How runs are streamed: `"sse"` (the default, over `fetch`), `"websocket"`
   * (one socket at `{baseUrl}/agents/{agent}/ws`), or a Transport of your own.
   * A transport the client creates is closed by `dispose()`; one you pass in
   * is yours to close.
   */
  transport?: "sse" | "websocket" | Transport | undefined;
  /** Used for the transcript, by the SSE transport the client creates, and for WebSocket tickets. */
  fetch?: typeof fetch | undefined;
  /**
   * The WebSocket class the socket of `transport: "websocket"` opens with,
   * instead of the global one (Node.js 20 has none: pass `ws`'s, say). The
   * client owns that socket, so `dispose()` closes it. Given with any other
   * transport, it throws a TypeError here.
   */
  WebSocket?: typeof WebSocket | undefined;
  /**
   * fetch's `credentials` for every request the client makes (runs, attaches,
   * stops, decisions, transcripts, WebSocket tickets) through the transport it
   * creates: `"same-origin"` (the default), or `"include"` to send cookies to
   * a server of another origin (which must allow it with CORS).
   */
  credentials?: CredentialsMode | undefined;
  /**
   * Extra request headers (authentication, say); read at request time. Over a
   * WebSocket, which a browser cannot give headers, they fetch a ticket
   * (`POST …/tickets`) that opens the socket.
   */
  headers?: Record<string, string> | undefined;
  /**
   * The name of a channel the tabs of one user share on this origin (a
   * BroadcastChannel; `useAgent`'s `persist` names one for its user). A tab on
   * it tells the others when a run of its own begins and ends, and when the
   * list of conversations changed — by ids only, never a turn's text; a tab
   * that shows that conversation then loads its transcript and follows the
   * run, and a `ConversationList` sharing the client loads the list again.
   * Without it, or without BroadcastChannel, a tab learns of another's runs
   * only when it loads the transcript.
   */
  tabChannel?: string | undefined;
  /** Called whenever the conversation id changes: minted by the server, forgotten, reset. */
  onContext?: ((contextId: string | null) => void) | undefined;
  /**
   * Called with the result of every run the client reads to its end — a
   * send's, a decision's, a regeneration's, an edit's, a run `start()` found
   * in progress — whatever its stop reason (`end`, `stopped`, `interrupted`,
   * `error`), before the command's promise resolves.
   */
  onFinish?: ((result: SendResult) => void) | undefined;
  /**
   * Called when a run or its request failed: with the ThinwireError a
   * `send()`, `decide()`, `regenerate()`, `edit()` or `switchBranch()`
   * rejects with, or a resumed run or the transcript `start()` loads failed
   * with (once its tries gave up); with the run's error (`snapshot.error`, e.g.
   * `agent_error`) when a run ended with stop reason `error` (then `onFinish`
   * follows). Not for `aborted` (a reset or dispose), nor for a refusal made
   * before any request (empty text, a send while another runs).
   */
  onError?: ((error: ThinwireError | AgentErrorInfo) => void) | undefined;
  /**
   * How a broken stream is reattached, a send whose response never started
   * repeated, and a transcript that failed to load loaded again.
   */
  reconnect?: ReconnectOptions | undefined;
  /**
   * Batches the notifications of streaming frames: called with a `flush` when
   * a frame changed the view and no flush is scheduled yet; `flush` notifies
   * once for all changes made since. Without it every change notifies at once.
   * Other changes (a send, a reset, hydration) and any change of `status` (so
   * the end of a run) always notify at once, carrying what was batched.
   * `nextFrame` is the one `useAgent` uses: once per animation frame, on a
   * timer where frames are paused (a hidden tab) or missing (Node.js).
   *
   * ```ts
   * new AgentClient({ agent: "demo", schedule: nextFrame, minNotifyInterval: MIN_FRAME_INTERVAL_MS });
   * ```
   */
  schedule?: Schedule | undefined;
  /**
   * With `schedule`: milliseconds a batched notification keeps from the one
   * before it (immediate ones included); a flush that comes sooner waits for
   * the next `schedule`. `useAgent` sets it to `MIN_FRAME_INTERVAL_MS`, so a
   * view commits at most 60 times a second, whatever the display's refresh rate.
   */
  minNotifyInterval?: number | undefined;
}

/** Every option's name: the type checker keeps it in step with `AgentClientOptions`. */
const OPTION_NAMES = {
  agent: true,
  baseUrl: true,
  contextId: true,
  pageSize: true,
  transport: true,
  fetch: true,
  WebSocket: true,
  credentials: true,
  headers: true,
  tabChannel: true,
  onContext: true,
  onFinish: true,
  onError: true,
  reconnect: true,
  schedule: true,
  minNotifyInterval: true,
} satisfies Record<keyof AgentClientOptions, true>;

/**
 * Refuses, given a value, what plain JavaScript would otherwise drop without
 * a word: `persist`, an option of `useAgent`'s only, and a misspelt option —
 * one of these in another case (`baseURL`, as axios spells it). Other names
 * pass: an object spread into the options may well carry more.
 */
export function checkOptionNames(options: AgentClientOptions): void {
  const given = options as unknown as Record<string, unknown>;
  for (const name of Object.keys(options)) {
    if (Object.hasOwn(OPTION_NAMES, name) || given[name] === undefined) continue;
    if (name === "persist") {
      throw new TypeError(
        "AgentClient has no option persist (useAgent's): keep the conversation with contextId, read from " +
          "storage, and onContext writing it there — see docs/hook.md, AgentClient.",
      );
    }
    const meant = Object.keys(OPTION_NAMES).find((option) => option.toLowerCase() === name.toLowerCase());
    if (meant !== undefined) throw new TypeError(`AgentClient has no option ${name}: did you mean ${meant}?`);
  }
}
