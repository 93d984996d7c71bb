/**
 * The transcript loader: the server's public transcript in the view. It loads
 * a conversation on `start()` (hydrate), shows it again after the view fell
 * out of step with the server (refresh: a refused decision, a waiting run
 * stopped), and reads the reply of a run that ended unseen (settle).
 *
 * Turns shown again keep their ids where the role matches, so React keys stay stable.
 */
import { aborted, errorInfo, ThinwireError, toThinwireError } from "./errors.js";
import { type InterruptRequest, STOP_REASONS, type Transcript, type TranscriptTurn } from "./generated/wire.js";
import { checkProtocol, errorFromResponse, requestSignal } from "./http.js";
import { publicInterrupt } from "./interrupt.js";
import type { SendResult } from "./send-result.js";
import { runEnded, type Turn } from "./snapshot.js";
import { agentUrl, type TransportTarget } from "./transport.js";
import type { View } from "./view.js";

/** A run `hydrate` found in progress, with the transcript's turns before it; not shown yet. */
export interface ActiveRun {
  runId: string;
  turns: Turn[];
  interrupt: InterruptRequest | null;
}

/** How the loader makes its requests. */
export interface TranscriptRequests {
  fetch: typeof fetch;
  credentials: RequestCredentials;
}

export class TranscriptLoader {
  readonly #requests: TranscriptRequests;
  readonly #target: () => TransportTarget;
  readonly #view: View;

  /** `target` is read at each request, so changed headers are picked up. */
  constructor(requests: TranscriptRequests, target: () => TransportTarget, view: View) {
    this.#requests = requests;
    this.#target = target;
    this.#view = view;
  }

  /**
   * Shows the transcript of `contextId`, or returns the run in progress for the
   * caller to follow. A failure is shown in the view, then thrown (an id the
   * server does not know is forgotten instead, quietly); resolves with null
   * when aborted.
   */
  async hydrate(contextId: string, signal: AbortSignal): Promise<ActiveRun | null> {
    const view = this.#view;
    try {
      const transcript = await this.#load(contextId, signal);
      if (signal.aborted) return null;
      const turns = publicTurns(transcript.turns).map((turn) => this.#turn(turn));
      const interrupt = publicInterrupt(transcript.pendingInterrupt);
      const runId = transcript.activeRunId;
      if (typeof runId === "string" && runId !== "") return { runId, turns, interrupt };
      view.show({ turns, interrupt, status: "idle" });
    } catch (caught) {
      if (signal.aborted) return null;
      const error = toThinwireError(caught);
      if (error.code === "context_not_found") {
        view.clear();
        return null;
      }
      view.show({ status: "error", error: errorInfo(error) });
      throw error;
    }
    return null;
  }

  /**
   * Shows the server's transcript and pending interrupt again, keeping turn ids;
   * best effort, and only while `current()` says the caller is still what runs.
   * Resolves with the pending interrupt, or undefined when nothing was shown.
   */
  async refresh(
    contextId: string,
    signal: AbortSignal,
    current: () => boolean = () => true,
  ): Promise<InterruptRequest | null | undefined> {
    let transcript: Transcript;
    try {
      transcript = await this.#load(contextId, signal);
    } catch {
      return undefined;
    }
    if (signal.aborted || !current() || this.#view.snapshot.contextId !== contextId) return undefined;
    const interrupt = publicInterrupt(transcript.pendingInterrupt);
    this.#view.show({ turns: this.#replaceTurns(publicTurns(transcript.turns)), interrupt });
    return interrupt;
  }

  /** The run ended unseen: its reply is the transcript's last assistant turn. Null if it still runs. */
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
    this.#view.show({
      turns: this.#replaceTurns(turns),
      interrupt: publicInterrupt(transcript.pendingInterrupt),
      ...runEnded(this.#view.snapshot, stopReason),
    });
    return { text: reply.text, toolCalls: [...reply.toolCalls], contextId, runId, stopReason };
  }

  /** `GET …/contexts/{contextId}`: the public transcript of a conversation. */
  async #load(contextId: string, signal: AbortSignal): Promise<Transcript> {
    const { headers, ...target } = this.#target();
    const url = agentUrl(target, `/contexts/${encodeURIComponent(contextId)}`);
    let body: unknown;
    const request = requestSignal(signal);
    try {
      const response = await this.#requests.fetch(url, {
        method: "GET",
        headers: { accept: "application/json", ...headers },
        credentials: this.#requests.credentials,
        signal: request.signal,
      });
      if (!response.ok) throw await errorFromResponse(response);
      checkProtocol(response);
      body = await response.json();
    } catch (error) {
      if (error instanceof SyntaxError) {
        throw new ThinwireError("protocol_error", "The transcript is not JSON.", { cause: error });
      }
      throw toThinwireError(error, signal);
    } finally {
      request.release();
    }
    if (!Array.isArray((body as { turns?: unknown } | null)?.turns)) {
      throw new ThinwireError("protocol_error", "The transcript has no turns.");
    }
    return body as Transcript;
  }

  #turn(turn: TranscriptTurn, id?: string): Turn {
    const fresh = this.#view.turn(turn.role, turn.text, false, turn.toolCalls, turn.stopReason ?? null);
    return id === undefined ? fresh : { ...fresh, id };
  }

  /** The transcript's turns, keeping the ids of the turns shown at the same places. */
  #replaceTurns(turns: readonly TranscriptTurn[]): Turn[] {
    const shown = this.#view.snapshot.turns;
    return turns.map((turn, index) => {
      const current = shown[index];
      return this.#turn(turn, current?.role === turn.role ? current.id : undefined);
    });
  }
}

const STOP_REASON_SET: ReadonlySet<string> = new Set(STOP_REASONS);

/** Keeps the turns a UI can show; tolerant of unknown roles and missing fields. */
function publicTurns(turns: readonly TranscriptTurn[]): TranscriptTurn[] {
  return turns
    .filter((turn) => turn.role === "user" || turn.role === "assistant")
    .map((turn) => ({
      role: turn.role,
      text: typeof turn.text === "string" ? turn.text : "",
      toolCalls: Array.isArray(turn.toolCalls) ? [...turn.toolCalls] : [],
      stopReason: STOP_REASON_SET.has(turn.stopReason ?? "") ? turn.stopReason : null,
    }));
}
