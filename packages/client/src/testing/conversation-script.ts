/**
 * A fake server's script that keeps conversations as a thinwire server does:
 * turns with stable ids, a tree of exchanges (a user turn and its reply) where
 * a regeneration or an edit adds a sibling and a branch switch picks one, a
 * title, transcripts a page at a time (the last `limit` exchanges, or those
 * `before` a turn along its branch), and the caller's conversations listed
 * most recently active first with a keyset cursor. Serve it with `fakeFetch`
 * / `fakeWebSocket`; both wires made from one script are one server.
 *
 * ```ts
 * const script = conversationScript({ answer: (text) => ({ text: `Echo: ${text}`, title: "Echoes" }) });
 * const client = new AgentClient({ agent: "demo", fetch: fakeFetch(script, newLog()) });
 * ```
 *
 * Every run ends at once, with stop reason `end` — unless its answer holds it
 * (`until`): then it is in progress until that settles, and the conversation
 * is busy, as on the server. A regenerated exchange gets
 * a new user turn (a copy of the one it answers) as well as a new reply. A
 * clear drops every exchange, and a title taken from a message. A send that
 * names the turn it follows (`afterTurnId`) and a regeneration that names its
 * reply (`turnId`) go on the branch that ends with that turn's exchange, shown
 * from then on, or are refused with `branch_moved` when an exchange follows it
 * (or a clear dropped it), as the server does; and, as the server does, the
 * run's `run_start` says when that (or an edit of a turn off the branch shown)
 * made another branch the one shown (`branchSwitched`).
 */
import type {
  Activity,
  ConversationPage,
  ConversationSummary,
  Transcript,
  TranscriptTurn,
  TurnMeta,
} from "../generated/wire.js";
import type { RunFrame } from "../transport.js";
import type { ConversationQuery, Refusal, Reply, Script, TranscriptQuery } from "./fake-server.js";
import { runFrames } from "./frames.js";

/** What the agent shows for a message: its reply, and what it streams before it. */
export interface Answer {
  text: string;
  thinking?: string;
  /** Tools it calls, in order (`ok` defaults to true). */
  tools?: Array<{ name: string; ok?: boolean }>;
  /** Names the conversation (a `title` frame) when it has no title yet, or one taken from a message. */
  title?: string;
  /**
   * Holds the run before its `done` until this settles (its reply streamed by
   * then). Meanwhile the run is in progress, as on the server: a transcript
   * names it (`activeRunId`) and shows the user's turn but not the reply, an
   * attach follows it as it goes, the list says `running`, and a send,
   * regeneration, edit, branch switch, clear or forget of the conversation is
   * refused with `409 context_busy`.
   */
  until?: PromiseLike<unknown>;
}

export interface ConversationScriptOptions {
  /** The answer to `text`, after the turns of the branch before it; by default `You said “text”.` */
  answer?: (text: string, history: readonly TranscriptTurn[]) => Answer | string;
  /** The clock, in seconds: the turns' meta and the conversations' times. By default 1, 2, 3… */
  now?: () => number;
  /**
   * Name an untitled conversation after the message that starts a run, as the
   * server does: no frame says so, the transcript and the list show it.
   */
  autoTitle?: boolean;
}

/** Who gave a conversation its title: a message (`auto`), the agent or the user. */
type TitleSource = "auto" | "agent" | "user";
/** The longest title taken from a message (the server's). */
const AUTO_TITLE = 60;

interface Node {
  children: Exchange[];
  /** The child the current branch goes on with. */
  active: number;
}

interface Exchange extends Node {
  user: TranscriptTurn;
  reply: TranscriptTurn;
}

/** An exchange of a branch, with the node it hangs from. */
interface Step {
  exchange: Exchange;
  parent: Node;
}

interface Conversation extends Node {
  contextId: string;
  title: string | null;
  titleSource: TitleSource | null;
  createdAt: number;
  updatedAt: number;
  /** The last seq sent, and the frames of the latest run (for an attach). */
  seq: number;
  runs: number;
  turns: number;
  lastRun: LiveRun;
  /** The exchange whose run is in progress (held by its answer's `until`). */
  running: { runId: string; exchange: Exchange } | null;
}

/** The frames of a run as they come: all of them at once, or the last (`done`) later. */
class LiveRun {
  readonly #frames: RunFrame[];
  #over: boolean;
  #waiting: Array<() => void> = [];

  constructor(frames: RunFrame[] = [], over = true) {
    this.#frames = frames;
    this.#over = over;
  }

  /** The run ends with `frame`. */
  end(frame: RunFrame): void {
    this.#frames.push(frame);
    this.#over = true;
    for (const wake of this.#waiting.splice(0)) wake();
  }

  /** Its frames after the seq `after`: those sent, or, while it goes, those still to come too. */
  after(after: number): RunFrame[] | AsyncGenerator<RunFrame> {
    return this.#over ? this.#frames.filter((frame) => frame.seq > after) : this.#live(after);
  }

  async *#live(after: number): AsyncGenerator<RunFrame> {
    for (let index = 0; ; index++) {
      while (index >= this.#frames.length) {
        if (this.#over) return;
        await new Promise<void>((resolve) => this.#waiting.push(resolve));
      }
      const frame = this.#frames[index]!;
      if (frame.seq > after) yield frame;
    }
  }
}

const refusal = (status: number, code: string, message: string): Refusal => ({ error: { status, code, message } });
const NO_CONTEXT = refusal(404, "context_not_found", "No such conversation.");
const NO_TURN = refusal(404, "turn_not_found", "No such turn.");
const BRANCH_MOVED = refusal(
  409,
  "branch_moved",
  "The conversation changed elsewhere (another tab added to it, or cleared it), so nothing was done. Look at what it holds now and try again.",
);
const BUSY = refusal(409, "context_busy", "The conversation is busy with a reply; try again when it ends.");
const WHOLE: TranscriptQuery = { limit: null, before: null };

export function conversationScript(options: ConversationScriptOptions = {}): Script {
  const conversations = new Map<string, Conversation>();
  let tick = 0;
  const now = options.now ?? (() => ++tick);
  let minted = 0;

  /** The exchanges of the current branch. */
  function branch(conversation: Conversation): Step[] {
    const path: Step[] = [];
    for (let parent: Node = conversation; parent.children.length > 0; ) {
      const exchange = parent.children[parent.active]!;
      path.push({ exchange, parent });
      parent = exchange;
    }
    return path;
  }

  /** The exchanges from the first to the one of the turn `turnId`, on whichever branch it is; null when there is none. */
  function lineage(parent: Node, turnId: string): Step[] | null {
    for (const exchange of parent.children) {
      if (exchange.user.id === turnId || exchange.reply.id === turnId) return [{ exchange, parent }];
      const rest = lineage(exchange, turnId);
      if (rest) return [{ exchange, parent }, ...rest];
    }
    return null;
  }

  /**
   * Shows the branch that ends with the exchange of `turnId` and returns it: what a
   * message that follows that turn goes on. A refusal when another exchange follows it,
   * or the conversation has none of that id.
   */
  function follow(conversation: Conversation, turnId: string): Step[] | Refusal {
    const path = lineage(conversation, turnId);
    if (!path) return madeHere(conversation, turnId) ? BRANCH_MOVED : NO_TURN;
    if (path[path.length - 1]!.exchange.children.length > 0) return BRANCH_MOVED;
    for (const { exchange, parent } of path) parent.active = parent.children.indexOf(exchange);
    return path;
  }

  /** Whether the conversation made a turn of that id (a clear may have dropped it since). */
  function madeHere(conversation: Conversation, turnId: string): boolean {
    const match = /^turn-([0-9a-f]{12})-[ua]([0-9]+)$/.exec(turnId);
    return match !== null && match[1] === conversation.contextId.slice(-12) && Number(match[2]) <= conversation.turns;
  }

  /** The turns of `path`; the reply of `running` (a run in progress) is not one yet. */
  function turns(path: readonly Step[], running: Exchange | null = null): TranscriptTurn[] {
    return path.flatMap(({ exchange, parent }) => {
      const numbers = { siblings: parent.children.length, siblingIndex: parent.children.indexOf(exchange) };
      const user = { ...exchange.user, ...numbers };
      return exchange === running ? [user] : [user, { ...exchange.reply, ...numbers }];
    });
  }

  /** The conversation, unless a run in progress holds it. */
  function idle(conversation: Conversation | Refusal): Conversation | Refusal {
    return "error" in conversation || conversation.running === null ? conversation : BUSY;
  }

  /** The page `query` asks for: the last `limit` exchanges of the branch shown, or of those before the turn `before`. */
  function transcript(conversation: Conversation, { limit, before }: TranscriptQuery = WHOLE): Transcript | Refusal {
    let path = branch(conversation);
    if (before !== null) {
      const found = lineage(conversation, before);
      if (!found) return NO_TURN;
      path = found.slice(0, -1);
    }
    const start = limit === null ? 0 : Math.max(0, path.length - limit);
    const { contextId, title, running } = conversation;
    return {
      contextId,
      agent: "demo",
      title,
      turns: turns(path.slice(start), running?.exchange),
      activeRunId: running?.runId ?? null,
      pendingInterrupt: null,
      hasEarlier: start > 0,
    };
  }

  function summary(conversation: Conversation): ConversationSummary {
    const shown = turns(branch(conversation), conversation.running?.exchange);
    return {
      contextId: conversation.contextId,
      title: conversation.title,
      createdAt: conversation.createdAt,
      updatedAt: conversation.updatedAt,
      turnCount: shown.length,
      preview: (shown[shown.length - 1]?.text ?? "").slice(0, 80),
      status: conversation.running ? "running" : "idle",
    };
  }

  function turn(conversation: Conversation, role: "user" | "assistant", text: string): TranscriptTurn {
    conversation.turns += 1;
    const id = `turn-${conversation.contextId.slice(-12)}-${role === "user" ? "u" : "a"}${conversation.turns}`;
    const meta: TurnMeta = { startedAt: now(), finishedAt: null, model: null, usage: null };
    const stopReason = role === "user" ? null : "end";
    return { id, role, text, toolCalls: [], stopReason, thinking: "", activity: [], meta, asked: null, siblings: 1, siblingIndex: 0 };
  }

  /** Whether showing `path` switched the conversation from the branch `shown` before: it is not along that one. */
  function switchedFrom(shown: readonly Step[], path: readonly Step[]): boolean {
    return path.some((step, index) => shown[index]?.exchange !== step.exchange);
  }

  /**
   * Adds an exchange for `text` under `parent`, as the alternative the branch shows, and runs its reply;
   * `switched`: the command first made another branch the one shown (`run_start`'s `branchSwitched`).
   */
  function exchange(conversation: Conversation, parent: Node, text: string, switched = false): Reply {
    const history = branch(conversation);
    const cut = history.findIndex((step) => step.parent === parent);
    const before = turns(history).slice(0, cut < 0 ? undefined : 2 * cut);
    const answered = options.answer?.(text, before) ?? `You said “${text}”.`;
    const answer = typeof answered === "string" ? { text: answered } : answered;
    if (options.autoTitle && conversation.title === null) {
      conversation.title = messageTitle(text);
      conversation.titleSource = "auto";
    }
    const user = turn(conversation, "user", text);
    const reply = turn(conversation, "assistant", answer.text);
    const added: Exchange = { user, reply, children: [], active: 0 };
    parent.children.push(added);
    parent.active = parent.children.length - 1;

    conversation.runs += 1;
    const runId = `run-${conversation.runs}`;
    const r = runFrames(conversation.contextId, runId, conversation.seq + 1);
    const afterTurnId = before[before.length - 1]?.id ?? null;
    const frames = [r.start({ turnId: reply.id, userTurnId: user.id, afterTurnId, branchSwitched: switched })];
    if (answer.title !== undefined && (conversation.titleSource ?? "auto") === "auto") {
      conversation.title = answer.title;
      conversation.titleSource = "agent";
      frames.push(r.title(answer.title));
    }
    if (answer.thinking) frames.push(r.thinking(answer.thinking));
    const activity: Activity[] = (answer.tools ?? []).map(({ name, ok = true }, index) => {
      const callId = `call-${index + 1}`;
      frames.push(r.call(callId, name), r.result(callId, name, ok));
      return { callId, name, ok };
    });
    const toolCalls = activity.map((call) => call.name);
    frames.push(r.token(answer.text));
    const done = r.done(answer.text, toolCalls);
    Object.assign(reply, { thinking: answer.thinking ?? "", activity, toolCalls });
    user.meta = { ...user.meta, finishedAt: user.meta.startedAt };
    const end = () => {
      reply.meta = { ...reply.meta, finishedAt: now() };
      conversation.seq += 1;
      conversation.updatedAt = now();
    };
    conversation.seq += frames.length;
    if (answer.until === undefined) {
      end();
      frames.push(done);
      conversation.lastRun = new LiveRun(frames);
      return { frames };
    }
    // In progress until the answer lets it end.
    const live = (conversation.lastRun = new LiveRun(frames, false));
    const running = (conversation.running = { runId, exchange: added });
    conversation.updatedAt = now();
    const finish = () => {
      if (conversation.running === running) conversation.running = null;
      end();
      live.end(done);
    };
    void Promise.resolve(answer.until).then(finish, finish);
    return { frames: live.after(0) };
  }

  function find(contextId: string): Conversation | Refusal {
    return conversations.get(contextId) ?? NO_CONTEXT;
  }

  return {
    run(body) {
      let conversation: Conversation | Refusal;
      if (body.contextId == null) {
        minted += 1;
        const contextId = `ctx-${minted.toString(16).padStart(36, "0")}`;
        const time = now();
        conversation = { contextId, title: null, titleSource: null, createdAt: time, updatedAt: time, seq: 0, runs: 0, turns: 0, lastRun: new LiveRun(), running: null, children: [], active: 0 };
        conversations.set(contextId, conversation);
      } else {
        conversation = idle(find(body.contextId));
      }
      if ("error" in conversation) return conversation;
      const shown = branch(conversation);
      const path = body.afterTurnId == null ? shown : follow(conversation, body.afterTurnId);
      if ("error" in path) return path;
      return exchange(conversation, path[path.length - 1]?.exchange ?? conversation, body.message.text, switchedFrom(shown, path));
    },
    regenerate(contextId, { turnId }) {
      const conversation = idle(find(contextId));
      if ("error" in conversation) return conversation;
      const shown = branch(conversation);
      const path = turnId == null ? shown : follow(conversation, turnId);
      if ("error" in path) return path;
      const switched = switchedFrom(shown, path);
      const last = path.pop();
      if (!last) return refusal(409, "nothing_to_regenerate", "There is no reply to regenerate.");
      return exchange(conversation, last.parent, last.exchange.user.text, switched);
    },
    edit(contextId, { turnId, message }) {
      const conversation = idle(find(contextId));
      if ("error" in conversation) return conversation;
      // On whichever branch: the one through it is shown first, as the server does.
      const path = lineage(conversation, turnId);
      const step = path?.[path.length - 1];
      if (!path || !step) return NO_TURN;
      if (step.exchange.user.id !== turnId) return refusal(400, "not_a_user_turn", "Only a user's turn can be edited.");
      const switched = switchedFrom(branch(conversation), path);
      for (const { exchange, parent } of path) parent.active = parent.children.indexOf(exchange);
      return exchange(conversation, step.parent, message.text, switched);
    },
    branch(contextId, { turnId, index }, query) {
      const conversation = idle(find(contextId));
      if ("error" in conversation) return conversation;
      // On whichever branch, as the server finds it.
      const path = lineage(conversation, turnId);
      const step = path?.[path.length - 1];
      if (!path || !step) return NO_TURN;
      if (index >= step.parent.children.length) return refusal(404, "branch_not_found", "No such branch.");
      for (const { exchange, parent } of path) parent.active = parent.children.indexOf(exchange);
      step.parent.active = index;
      return transcript(conversation, query);
    },
    attach(contextId, after) {
      const frames = conversations.get(contextId)?.lastRun.after(after) ?? [];
      return !Array.isArray(frames) || frames.length > 0 ? { frames } : { nothing: true };
    },
    transcript(contextId, query) {
      const conversation = conversations.get(contextId);
      return conversation && transcript(conversation, query);
    },
    conversations({ limit, cursor }: ConversationQuery): ConversationPage {
      const key = (conversation: Conversation) => `${String(conversation.updatedAt).padStart(16, "0")}|${conversation.contextId}`;
      const ordered = [...conversations.values()].sort((a, b) => (key(a) < key(b) ? 1 : -1));
      const rest = cursor === null ? ordered : ordered.filter((conversation) => key(conversation) < cursor);
      const page = rest.slice(0, limit);
      const more = rest.length > page.length;
      return { conversations: page.map(summary), nextCursor: more ? key(page[page.length - 1]!) : null };
    },
    rename(contextId, { title }) {
      const conversation = find(contextId);
      if ("error" in conversation) return conversation;
      if ([...title].length > 200) return refusal(400, "title_too_long", "A title is at most 200 characters.");
      conversation.title = title;
      conversation.titleSource = "user";
      return summary(conversation);
    },
    clear(contextId) {
      const conversation = idle(find(contextId));
      if ("error" in conversation) return conversation;
      conversation.children = [];
      conversation.active = 0;
      conversation.lastRun = new LiveRun();
      if (conversation.titleSource === "auto") {
        conversation.title = null;
        conversation.titleSource = null;
      }
      return transcript(conversation);
    },
    forget(contextId) {
      const conversation = idle(find(contextId));
      if ("error" in conversation) return conversation;
      conversations.delete(contextId);
    },
  };
}

/** A title made from a message, as the server makes it: its words, cut short. */
function messageTitle(text: string): string {
  const words = text.split(/\s+/).filter(Boolean).join(" ");
  return words.length <= AUTO_TITLE ? words : `${words.slice(0, AUTO_TITLE - 1).trimEnd()}…`;
}
