/**
 * The transcript loader: the server's public transcript in the view. It loads
 * a conversation on `start()` (hydrate), shows it again after the view fell
 * out of step with the server (refresh: a refused decision, a message
 * refused as busy or as following a turn the conversation went on from, a
 * branch switch refused as busy, a waiting run stopped, the sibling counts
 * after a regeneration or an edit), reads the
 * reply of a run that ended unseen (settle), shows another branch
 * (`POST …/branch`), and the exchanges before those shown (earlier).
 *
 * Each reads a page: the last `pageSize` exchanges of the branch (`?limit=`),
 * or those before a turn (`&before=`). A page that replaces the turns shown
 * keeps the earlier pages loaded when it begins at a turn among them (the
 * branch goes on from there, so what precedes it still holds); otherwise it
 * is shown alone. An older server ignores `limit` and sends the whole
 * transcript without `hasEarlier`.
 *
 * Turns carry the server's ids, the same as the run that streamed them
 * announced, so React keys stay stable. A transcript without ids (an older
 * server) keeps the ids shown at the same places where the role matches.
 *
 * A transcript may say a run is in progress that the view did not read: one
 * another tab started, or that its answer to a question continued. `hydrate`
 * returns it for the caller to follow; `refresh` and `settle` hand it to
 * `follow`, the client's, which reads it into a fresh reply — so a tab
 * refused because another acted first shows what that one started.
 *
 * `hydrate` tries again after a transient failure (the server briefly down),
 * with the `reconnect` backoff: a GET is safe to repeat. When it gives up, the
 * view shows the conversation without its transcript, and the loader says so
 * (`unloaded`) until a transcript of it is shown.
 */
import { aborted, errorInfo, ThinwireError, toThinwireError } from "./errors.js";
import {
  type Activity as WireActivity,
  type BranchRequest,
  type InterruptRequest,
  STOP_REASONS,
  type Transcript,
  type TranscriptTurn,
  type TurnAsked,
  type TurnMeta,
} from "./generated/wire.js";
import { type JsonRequests, requestJson } from "./http.js";
import { publicInterrupt } from "./interrupt.js";
import { backoffDelay, isTransient, type ReconnectOptions, sleep } from "./reconnect.js";
import type { SendResult } from "./send-result.js";
import { type Activity, type AgentErrorInfo, NO_META, runEnded, type Snapshot, type Turn } from "./snapshot.js";
import { agentUrl, type TransportTarget } from "./transport.js";
import type { View } from "./view.js";

/** A run a transcript showed in progress, with the transcript's turns before it; not shown yet. */
export interface ActiveRun {
  runId: string;
  turns: readonly Turn[];
  interrupt: InterruptRequest | null;
  hasEarlier: boolean;
  /** The error to show while it is followed: the refusal that found it (none by default). */
  error?: AgentErrorInfo | null;
}

/**
 * Follows a run a reload of the transcript found in progress, after `run.turns`;
 * false when the client is busy with something else, which then owns the view.
 */
export type FollowRun = (contextId: string, run: ActiveRun) => boolean;

export class TranscriptLoader {
  readonly #requests: JsonRequests;
  readonly #target: () => TransportTarget;
  readonly #view: View;
  readonly #pageSize: number;
  readonly #limits: Required<ReconnectOptions>;
  readonly #follow: FollowRun;
  /** See `shown`. */
  #shown = 0;
  /** See `unloaded`. */
  #unloaded: string | null = null;

  /**
   * `target` is read at each request, so changed headers are picked up;
   * `pageSize` may be Infinity (no pages); `limits` bound the tries of `hydrate`;
   * `follow` reads a run that `refresh` or `settle` found in progress.
   */
  constructor(
    requests: JsonRequests,
    target: () => TransportTarget,
    view: View,
    pageSize: number,
    limits: Required<ReconnectOptions>,
    follow: FollowRun,
  ) {
    this.#requests = requests;
    this.#target = target;
    this.#view = view;
    this.#pageSize = pageSize;
    this.#limits = limits;
    this.#follow = follow;
  }

  /**
   * How many transcripts the view showed, each with the server's title at the
   * time: a caller compares it before and after a run to tell whether the view
   * read the title since.
   */
  get shown(): number {
    return this.#shown;
  }

  /**
   * Whether the view shows `contextId` without its transcript: the last
   * `hydrate` of it gave up, and no transcript of it was shown since (a send's
   * refresh, say). Its history is on the server, not on the screen.
   */
  unloaded(contextId: string | null): boolean {
    return contextId !== null && contextId === this.#unloaded;
  }

  /**
   * Shows the transcript of `contextId`, or returns the run in progress for the
   * caller to follow. A transient failure (`isTransient`) is tried again with
   * the `reconnect` backoff, the view left as it is meanwhile; the last
   * failure is shown in the view, then thrown (an id the server does not know,
   * or calls invalid, is forgotten instead, quietly). Resolves with null when
   * aborted, waits included.
   */
  async hydrate(contextId: string, signal: AbortSignal): Promise<ActiveRun | null> {
    const view = this.#view;
    try {
      const transcript = await this.#loadAgain(contextId, signal);
      if (signal.aborted) return null;
      this.#unloaded = null;
      const turns = publicTurns(transcript.turns).map((turn) => this.#turn(turn));
      const interrupt = publicInterrupt(transcript.pendingInterrupt);
      const title = titleOf(transcript);
      const hasEarlier = hasEarlierOf(transcript);
      const runId = transcript.activeRunId;
      this.#shown += 1;
      if (title !== view.snapshot.title) view.show({ title });
      if (typeof runId === "string" && runId !== "") return { runId, turns, interrupt, hasEarlier };
      view.show({ turns, interrupt, hasEarlier, status: "idle" });
    } catch (caught) {
      if (signal.aborted) return null;
      const error = toThinwireError(caught);
      // An id the server does not know, or does not take for an id: forgotten alike.
      if (error.code === "context_not_found" || error.code === "invalid_context_id") {
        view.forget();
        return null;
      }
      this.#unloaded = contextId;
      view.show({ status: "error", error: errorInfo(error) });
      throw error;
    }
    return null;
  }

  /**
   * Shows the server's transcript and pending interrupt again, keeping turn ids;
   * best effort, and only while `current()` says the caller is still what runs.
   * A run in progress there that the view did not read (another tab's) is
   * followed (`follow`): with the error shown, when `keepError` says so (a
   * refusal it explains), else none. Resolves with the pending interrupt, or
   * undefined when nothing was shown.
   */
  async refresh(
    contextId: string,
    signal: AbortSignal,
    current: () => boolean = () => true,
    { keepError = false }: { keepError?: boolean } = {},
  ): Promise<InterruptRequest | null | undefined> {
    let transcript: Transcript;
    try {
      transcript = await this.#load(contextId, signal);
    } catch {
      return undefined;
    }
    if (signal.aborted || !current() || this.#view.snapshot.contextId !== contextId) return undefined;
    const interrupt = publicInterrupt(transcript.pendingInterrupt);
    const page = this.#replacePage(transcript);
    const runId = this.#unread(transcript);
    if (runId !== null) {
      const error = keepError ? this.#view.snapshot.error : null;
      if (!this.#follow(contextId, { runId, interrupt, ...page, error })) return undefined;
      this.#show({ title: titleOf(transcript) });
      return interrupt;
    }
    this.#show({ ...page, interrupt, title: titleOf(transcript) });
    return interrupt;
  }

  /**
   * Shows the branch where the exchange of `turnId` is replaced by its
   * alternative `index` (`POST …/branch`), with no run's thinking or activity
   * (the latest run's may be on another branch; each reply keeps its own).
   * Throws the server's refusal (`branch_not_found`, …), or `aborted` once
   * `signal` fired; shows nothing unless `current()` says the caller still
   * owns the view.
   */
  async branch(contextId: string, request: BranchRequest, signal: AbortSignal, current: () => boolean): Promise<void> {
    const path = `/contexts/${encodeURIComponent(contextId)}/branch${this.#query()}`;
    const transcript = await this.#request("POST", path, signal, request);
    if (signal.aborted) throw aborted();
    if (!current() || this.#view.snapshot.contextId !== contextId) return;
    this.#show({
      ...this.#replacePage(transcript),
      interrupt: publicInterrupt(transcript.pendingInterrupt),
      title: titleOf(transcript),
      status: "idle",
      error: null,
      thinking: "",
      activity: [],
    });
  }

  /**
   * The run ended unseen: its reply is the transcript's last assistant turn.
   * Null if it still runs. A later run in progress there (another tab's) is
   * followed once the reply is shown (`follow`).
   */
  async settle(contextId: string, runId: string, signal: AbortSignal): Promise<SendResult | null> {
    const transcript = await this.#load(contextId, signal);
    if (signal.aborted) throw aborted();
    if (transcript.activeRunId === runId) return null;
    const turns = publicTurns(transcript.turns);
    const reply = [...turns].reverse().find((turn) => turn.role === "assistant");
    if (!reply) {
      throw new ThinwireError("stream_interrupted", "The run ended without a reply.", { retryable: false });
    }
    const stopReason = reply.stopReason ?? "end";
    this.#show({
      ...this.#replacePage(transcript, turns),
      interrupt: publicInterrupt(transcript.pendingInterrupt),
      title: titleOf(transcript),
      ...runEnded(this.#view.snapshot, stopReason),
    });
    const later = this.#unread(transcript);
    if (later !== null) {
      const { turns: shown, interrupt, hasEarlier } = this.#view.snapshot;
      this.#follow(contextId, { runId: later, turns: shown, interrupt, hasEarlier });
    }
    return { text: reply.text, toolCalls: [...reply.toolCalls], contextId, runId, stopReason };
  }

  /**
   * Shows the page of exchanges before the turn `before`, the first one shown,
   * ahead of the turns shown — unless the conversation or its first turn
   * changed meanwhile (a reset, another conversation, another branch), or
   * `signal` fired: then nothing. Throws the server's refusal
   * (`turn_not_found`: that turn is gone, the history changed).
   */
  async earlier(contextId: string, before: string, signal: AbortSignal): Promise<void> {
    const transcript = await this.#load(contextId, signal, before);
    const { contextId: shown, turns } = this.#view.snapshot;
    if (signal.aborted || shown !== contextId || turns[0]?.id !== before) return;
    const page = publicTurns(transcript.turns).map((turn) => this.#turn(turn));
    this.#view.show({ turns: [...page, ...turns], hasEarlier: hasEarlierOf(transcript) });
  }

  /**
   * The run in progress the transcript names, unless the view read it (to its
   * `done`, a moment before the server let go of it): null when there is none.
   */
  #unread(transcript: Transcript): string | null {
    const runId = transcript.activeRunId;
    return typeof runId === "string" && runId !== "" && runId !== this.#view.state.runId ? runId : null;
  }

  /** Shows what a transcript says of the branch shown: its turns, interrupt and title. */
  #show(changes: Partial<Snapshot>): void {
    this.#shown += 1;
    if (this.#view.snapshot.contextId === this.#unloaded) this.#unloaded = null;
    this.#view.show(changes);
  }

  /** `#load`, tried again after a transient failure, with the backoff and limit of reconnects. */
  async #loadAgain(contextId: string, signal: AbortSignal): Promise<Transcript> {
    for (let attempt = 0; ; attempt += 1) {
      try {
        return await this.#load(contextId, signal);
      } catch (caught) {
        const error = toThinwireError(caught, signal);
        if (signal.aborted || attempt >= this.#limits.attempts || !isTransient(error)) throw error;
      }
      await sleep(backoffDelay(attempt, this.#limits), signal);
    }
  }

  /** `GET …/contexts/{contextId}`: a page of the public transcript of a conversation, the last or the one `before` a turn. */
  #load(contextId: string, signal: AbortSignal, before?: string): Promise<Transcript> {
    return this.#request("GET", `/contexts/${encodeURIComponent(contextId)}${this.#query(before)}`, signal);
  }

  /** The query asking for a page: none for the whole transcript. */
  #query(before?: string): string {
    const query = new URLSearchParams();
    if (Number.isFinite(this.#pageSize)) query.set("limit", String(this.#pageSize));
    if (before !== undefined) query.set("before", before);
    const text = query.toString();
    return text === "" ? "" : `?${text}`;
  }

  /** A request answered with a transcript. */
  async #request(method: string, path: string, signal: AbortSignal, body?: unknown): Promise<Transcript> {
    const { headers, ...target } = this.#target();
    const answer = await requestJson(this.#requests, agentUrl(target, path), { method, headers, body }, signal);
    if (!Array.isArray((answer as { turns?: unknown } | null)?.turns)) {
      throw new ThinwireError("protocol_error", "The transcript has no turns.");
    }
    return answer as Transcript;
  }

  /** The turn to show for `turn`: under the server's id, else `shownId`, else a provisional one. */
  #turn(turn: TranscriptTurn, shownId?: string): Turn {
    const { role, text, id, activity, ...fields } = turn;
    const shown = this.#view.turn(role, text, { ...fields, activity: activity.map(activityOf) });
    const known = id !== "" ? id : shownId;
    return known === undefined ? shown : { ...shown, id: known };
  }

  /**
   * What to show of a page of the branch in place of the turns shown: after
   * the turns shown before its first one, if it is among them, and under
   * their `hasEarlier`; else alone.
   */
  #replacePage(transcript: Transcript, turns = publicTurns(transcript.turns)): Pick<Snapshot, "turns" | "hasEarlier"> {
    const hasEarlier = hasEarlierOf(transcript);
    const shown = this.#view.snapshot;
    const first = turns[0]?.id;
    // A page that is not the whole branch may go on from earlier pages shown.
    const kept = hasEarlier && first ? shown.turns.findIndex((turn) => turn.id === first) : -1;
    if (kept < 0) return { turns: this.#replaceTurns(turns), hasEarlier };
    return { turns: [...shown.turns.slice(0, kept), ...this.#replaceTurns(turns, kept)], hasEarlier: shown.hasEarlier };
  }

  /**
   * The transcript's turns, shown from index `offset` on; those without an id
   * keep the ids of the turns shown at the same places.
   */
  #replaceTurns(turns: readonly TranscriptTurn[], offset = 0): Turn[] {
    const shown = this.#view.snapshot.turns;
    return turns.map((turn, index) => {
      const current = shown[offset + index];
      return this.#turn(turn, current?.role === turn.role ? current.id : undefined);
    });
  }
}

const STOP_REASON_SET: ReadonlySet<string> = new Set(STOP_REASONS);

/** Keeps the turns a UI can show; tolerant of unknown roles and missing fields (an older server's). */
function publicTurns(turns: readonly TranscriptTurn[]): TranscriptTurn[] {
  return turns
    .filter((turn) => turn.role === "user" || turn.role === "assistant")
    .map((turn) => {
      const siblings = count(turn.siblings, 1, 1);
      return {
        id: typeof turn.id === "string" ? turn.id : "",
        role: turn.role,
        text: typeof turn.text === "string" ? turn.text : "",
        toolCalls: Array.isArray(turn.toolCalls) ? turn.toolCalls.filter((name) => typeof name === "string") : [],
        stopReason: STOP_REASON_SET.has(turn.stopReason ?? "") ? turn.stopReason : null,
        thinking: typeof turn.thinking === "string" ? turn.thinking : "",
        activity: Array.isArray(turn.activity) ? turn.activity.filter(isActivity) : [],
        meta: metaOf(turn.meta),
        asked: askedOf(turn.asked),
        siblings,
        siblingIndex: Math.min(count(turn.siblingIndex, 0, 0), siblings - 1),
      };
    });
}

function titleOf(transcript: Transcript): string | null {
  return typeof transcript.title === "string" ? transcript.title : null;
}

/** An older server sends no `hasEarlier`: its transcript is whole. */
function hasEarlierOf(transcript: Transcript): boolean {
  return transcript.hasEarlier === true;
}

/** A whole number of at least `min`, else `fallback`. */
function count(value: unknown, min: number, fallback: number): number {
  return typeof value === "number" && Number.isInteger(value) && value >= min ? value : fallback;
}

function isActivity(value: unknown): value is WireActivity {
  const item = value as Partial<WireActivity> | null;
  return typeof item?.callId === "string" && typeof item.name === "string";
}

/** A tool call of a past reply, as the view shows it: `ok` null means it never reported a result. */
function activityOf({ callId, name, ok }: WireActivity): Activity {
  return { callId, name, state: ok === true ? "ok" : ok === false ? "error" : "running" };
}

const ASKED_STATUSES: ReadonlySet<unknown> = new Set<TurnAsked["status"]>(["waiting", "answered", "stopped"]);

/** What a reply asked; null when it asked nothing (or an older server does not say). */
function askedOf(value: unknown): TurnAsked | null {
  if (typeof value !== "object" || value === null) return null;
  const asked = value as Partial<Record<keyof TurnAsked, unknown>>;
  const request = publicInterrupt(asked.request);
  if (request === null || !ASKED_STATUSES.has(asked.status)) return null;
  const status = asked.status as TurnAsked["status"];
  return { request, status, decision: status === "answered" ? (asked.decision ?? null) : null };
}

function metaOf(value: unknown): TurnMeta {
  if (typeof value !== "object" || value === null) return NO_META;
  const meta = value as Partial<Record<keyof TurnMeta, unknown>>;
  const time = (field: unknown) => (typeof field === "number" && Number.isFinite(field) ? field : null);
  const usage = meta.usage as Partial<Record<"inputTokens" | "outputTokens", unknown>> | null | undefined;
  return {
    startedAt: time(meta.startedAt),
    finishedAt: time(meta.finishedAt),
    model: typeof meta.model === "string" ? meta.model : null,
    usage:
      typeof usage?.inputTokens === "number" && typeof usage.outputTokens === "number"
        ? { inputTokens: usage.inputTokens, outputTokens: usage.outputTokens }
        : null,
  };
}
