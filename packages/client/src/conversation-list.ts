/**
 * ConversationList: a small store over the caller's conversations with one
 * agent — `GET …/contexts`, a page at a time, most recently active first —
 * with renames and forgets, and the selection: which conversation is shown.
 * `subscribe` / `getSnapshot` follow the `useSyncExternalStore` contract, as
 * AgentClient's do.
 *
 * Given the `client` that shows the conversations, the list and the client
 * share one selection: it *is* the client's `contextId` (so `persist` keeps
 * it, and nothing else), `select()` opens a conversation in the client,
 * `create()` resets it, forgetting the conversation it shows resets it, and a
 * title the client learns shows in the list — and one a page lists for it, in
 * the client, unless the page may be older than the client's title (the rule
 * is the client's): then the list shows the client's. The list follows the
 * client's snapshot: when a run ends (a stop of one that waits for a decision
 * included), the client shows another branch, or it opens a conversation the
 * list does not show, the list is loaded again — once: a new conversation's
 * first run is listed when it ends. With the client's `tabChannel`, the list
 * also follows the other tabs': their runs' ends, renames and forgets load it
 * again, and its own renames and forgets are told to them. A conversation the client finds gone from the server
 * (deleted elsewhere: a load or a request of it refused with
 * `context_not_found`) leaves the list as it leaves the client, and a page
 * asked for before does not bring it back. Without a client, the selection is
 * the list's own.
 *
 * The server owns the list; the store holds the pages it loaded and the
 * cursor of the next. A refresh loads from the top as many conversations as
 * are shown (at most 100), so a scrolled list keeps its length; an answer that
 * a later refresh made stale is dropped, never cancelled.
 */
import { type AgentClient, listedTitle, onForgotten, onListChanged, showTitle, tellListChanged } from "./agent-client.js";
import { disposed, errorInfo, invalidRequest, ThinwireError, toThinwireError } from "./errors.js";
import type { ConversationPage, ConversationSummary, RenameRequest } from "./generated/wire.js";
import { type CredentialsMode, globalFetch, type JsonRequests, requestJson } from "./http.js";
import { Notifier } from "./notifier.js";
import { pageSizeOption } from "./page-size.js";
import { baseUrlOption } from "./base-url.js";
import type { AgentErrorInfo, Snapshot } from "./snapshot.js";
import { agentUrl, requestTarget } from "./transport.js";

export interface ConversationListOptions {
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
  /** Conversations per page: a whole number from 1 to 100 (default 20); anything else throws a TypeError here. */
  pageSize?: number | undefined;
  /** Extra request headers (authentication, say); read at request time. */
  headers?: Record<string, string> | undefined;
  /** fetch's `credentials` for every request: `"same-origin"` (the default) or `"include"`. */
  credentials?: CredentialsMode | undefined;
  fetch?: typeof fetch | undefined;
  /** The client that shows the selected conversation (see above); without one, the list keeps its own selection. */
  client?: AgentClient | null | undefined;
}

export interface ConversationListSnapshot {
  /** The conversations loaded so far, most recently active first. */
  conversations: readonly ConversationSummary[];
  /** A page is being loaded: the first, a refresh, or the next. */
  loading: boolean;
  /** The last failure: a page that did not load, a rename or a forget refused; cleared by the next success. */
  error: AgentErrorInfo | null;
  /** The server has more conversations than those loaded: `loadMore()` fetches the next page. */
  hasMore: boolean;
  /** The conversation shown: the client's `contextId`, or the list's own pick; null for a new conversation. */
  selected: string | null;
}

const MAX_PAGE = 100;
const MAX_TITLE = 200;

export class ConversationList {
  readonly #options: ConversationListOptions;
  readonly #requests: JsonRequests;
  readonly #notifier = new Notifier();
  readonly #pageSize: number;
  readonly #client: AgentClient | null;
  #snapshot: ConversationListSnapshot;
  #cursor: string | null = null;
  /** Bumped by every refresh: a page loaded for an older one is dropped. */
  #generation = 0;
  /** The loads of the current generation in flight: a refresh, or the next page. */
  #refreshing: Promise<void> | null = null;
  #loadingMore: Promise<void> | null = null;
  readonly #controllers = new Set<AbortController>();
  #unfollow: (() => void) | null = null;
  /**
   * The conversations the client found gone while a page was on its way, in
   * order: a page leaves out those found gone after it was asked for (see
   * `#present`). None is kept when no page is on its way: a page asked for
   * later does not list them.
   */
  readonly #gone: string[] = [];
  #started: Promise<void> | null = null;
  #disposed = false;

  constructor(options: ConversationListOptions) {
    if (!options.agent) throw new TypeError("ConversationList needs an agent name.");
    baseUrlOption(options.baseUrl);
    this.#options = options;
    this.#requests = {
      fetch: options.fetch ?? globalFetch,
      credentials: options.credentials ?? "same-origin",
    };
    this.#pageSize = pageSizeOption(options.pageSize, { fallback: 20, max: MAX_PAGE });
    this.#client = options.client ?? null;
    const selected = this.#client?.getSnapshot().contextId ?? null;
    this.#snapshot = { conversations: [], loading: false, error: null, hasMore: false, selected };
  }

  /** Registers a listener for snapshot changes; returns the unsubscribe function. */
  subscribe = (listener: () => void): (() => void) => this.#notifier.subscribe(listener);

  /** The current state: the same object until something changes. */
  getSnapshot = (): ConversationListSnapshot => this.#snapshot;

  /**
   * Loads the first page, and starts following the client. Idempotent;
   * resolves once the page is shown, never rejects (a failure is `error`).
   */
  start(): Promise<void> {
    if (this.#started) return this.#started;
    if (this.#disposed) return Promise.resolve();
    if (this.#client) this.#unfollow = this.#follow(this.#client);
    this.#started = this.refresh();
    return this.#started;
  }

  /**
   * Loads the list again from the top — as many conversations as are shown,
   * at least a page, at most 100 — replacing what is shown. Never rejects.
   */
  refresh(): Promise<void> {
    if (this.#disposed) return Promise.resolve();
    this.#generation += 1;
    const generation = this.#generation;
    this.#loadingMore = null;
    const limit = Math.min(MAX_PAGE, Math.max(this.#pageSize, this.#snapshot.conversations.length));
    const titles = this.#titles();
    const present = this.#present();
    const refreshing = this.#page(limit, null).then(
      (page) => {
        if (generation !== this.#generation) return;
        this.#refreshing = null;
        this.#cursor = page.nextCursor;
        const conversations = present(page.conversations);
        this.#show({ conversations, hasMore: page.nextCursor !== null, error: null });
        titles(conversations);
      },
      (error: unknown) => this.#failed(error, generation, () => (this.#refreshing = null)),
    );
    this.#refreshing = refreshing;
    this.#show({});
    return refreshing;
  }

  /**
   * Loads the next page and adds it below (a conversation shown already is
   * not shown twice). Does nothing without `hasMore`, or while the first page
   * loads; a second call while a page loads waits for the same. Never rejects.
   */
  loadMore(): Promise<void> {
    if (this.#disposed || this.#refreshing) return this.#refreshing ?? Promise.resolve();
    if (this.#loadingMore) return this.#loadingMore;
    const cursor = this.#cursor;
    if (cursor === null) return Promise.resolve();
    const generation = this.#generation;
    const titles = this.#titles();
    const present = this.#present();
    const loading = this.#page(this.#pageSize, cursor).then(
      (page) => {
        if (generation !== this.#generation) return;
        this.#loadingMore = null;
        this.#cursor = page.nextCursor;
        const shown = new Set(this.#snapshot.conversations.map((item) => item.contextId));
        const added = present(page.conversations).filter((item) => !shown.has(item.contextId));
        const conversations = [...this.#snapshot.conversations, ...added];
        this.#show({ conversations, hasMore: page.nextCursor !== null, error: null });
        titles(added);
      },
      (error: unknown) => this.#failed(error, generation, () => (this.#loadingMore = null)),
    );
    this.#loadingMore = loading;
    this.#show({});
    return loading;
  }

  /**
   * Renames a conversation (`PATCH …/contexts/{id}`), and shows the new title
   * in the list and in the client that shows it. Resolves with the server's
   * summary; rejects with a ThinwireError — `invalid_request` for a blank
   * title and `title_too_long` beyond 200 characters (no request made), or the
   * server's (`context_not_found`, …) — which `error` shows too.
   *
   * ```ts
   * await list.rename(id, "Refund for order 1234");
   * ```
   */
  async rename(contextId: string, title: string): Promise<ConversationSummary> {
    if (this.#disposed) throw disposed();
    const refusal = titleRefusal(title);
    if (refusal) throw this.#refused(refusal);
    const body: RenameRequest = { title };
    const answer = await this.#change("PATCH", contextId, body);
    const summary = isSummary(answer) ? answer : null;
    const renamed = summary?.title ?? title;
    const conversations = this.#snapshot.conversations.map((item) =>
      item.contextId === contextId ? (summary ?? { ...item, title: renamed }) : item,
    );
    this.#show({ conversations, error: null });
    if (this.#client) {
      showTitle(this.#client, contextId, renamed);
      tellListChanged(this.#client);
    }
    return summary ?? conversations.find((item) => item.contextId === contextId) ?? emptySummary(contextId, renamed);
  }

  /**
   * Forgets a conversation on the server (`DELETE …/contexts/{id}`: every
   * trace of it) and takes it off the list; when it is the one selected, a
   * new conversation is (`create()`). One the server does not know is gone
   * already: that is no failure. Rejects with the server's refusal
   * (`context_busy` while a run goes), which `error` shows too.
   */
  async remove(contextId: string): Promise<void> {
    if (this.#disposed) throw disposed();
    try {
      await this.#change("DELETE", contextId);
    } catch (caught) {
      if (!(caught instanceof ThinwireError && caught.code === "context_not_found")) throw caught;
    }
    const conversations = this.#snapshot.conversations.filter((item) => item.contextId !== contextId);
    this.#show({ conversations, error: null });
    if (this.#client) tellListChanged(this.#client);
    if (this.#snapshot.selected === contextId) this.create();
  }

  /**
   * Shows the conversation `contextId`: opens it in the client (see
   * `AgentClient.open`), or makes it the list's own selection. Resolves once
   * the client shows it; never rejects.
   */
  select(contextId: string): Promise<void> {
    if (this.#disposed) return Promise.resolve();
    if (this.#client) return this.#client.open(contextId);
    this.#show({ selected: contextId });
    return Promise.resolve();
  }

  /** Starts a new conversation: resets the client, or clears the list's own selection. */
  create(): void {
    if (this.#disposed) return;
    if (this.#client) this.#client.reset();
    else this.#show({ selected: null });
  }

  /** Cancels the requests in flight, stops following the client and drops every listener. */
  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    this.#generation += 1;
    this.#unfollow?.();
    for (const controller of this.#controllers) controller.abort();
    this.#controllers.clear();
    this.#notifier.close();
  }

  /**
   * Follows the client's snapshot: its id is the selection; a run that ends
   * refreshes the list — one that waited for a decision too, once a stop ends
   * it — and so does a conversation shown that the list does not show, unless
   * a run is being read: its end refreshes the list. The conversations it
   * finds gone leave the list, and a change it hears of (`onListChanged`)
   * refreshes it.
   */
  #follow(client: AgentClient): () => void {
    let previous = client.getSnapshot();
    this.#show({ selected: previous.contextId });
    const unforget = onForgotten(client, (contextId) => this.#forgotten(contextId, client));
    const unlist = onListChanged(client, () => void this.refresh());
    const unsubscribe = client.subscribe(() => {
      const next = client.getSnapshot();
      const before = previous;
      previous = next;
      if (next === before || this.#disposed) return;
      const { contextId, title } = next;
      if (contextId !== this.#snapshot.selected) this.#show({ selected: contextId });
      if (title !== null && contextId !== null && title !== before.title) this.#retitle(contextId, title);
      const ended = running(before) ? !running(next) : waitEnded(before, next);
      const unknown = contextId !== null && contextId !== before.contextId && !this.#shows(contextId) && !running(next);
      if (ended || unknown) void this.refresh();
    });
    return () => {
      unforget();
      unlist();
      unsubscribe();
    };
  }

  /**
   * The client forgot `contextId`, gone from the server: it leaves the list, in
   * the change that shows the client's new selection (told before the client's
   * subscribers, the client already shows it), and from the pages on their way.
   */
  #forgotten(contextId: string, client: AgentClient): void {
    if (this.#disposed) return;
    if (this.#refreshing !== null || this.#loadingMore !== null) this.#gone.push(contextId);
    const conversations = this.#snapshot.conversations.filter((item) => item.contextId !== contextId);
    const changed = conversations.length !== this.#snapshot.conversations.length;
    this.#show({ ...(changed ? { conversations } : {}), selected: client.getSnapshot().contextId });
  }

  /**
   * For a page asked for now: what leaves out of it the conversations the
   * client finds gone before it is loaded (the server listed them still).
   */
  #present(): (conversations: readonly ConversationSummary[]) => readonly ConversationSummary[] {
    const asked = this.#gone.length;
    return (conversations) => {
      const gone = new Set(this.#gone.slice(asked));
      return gone.size === 0 ? conversations : conversations.filter((item) => !gone.has(item.contextId));
    };
  }

  #shows(contextId: string): boolean {
    return this.#snapshot.conversations.some((item) => item.contextId === contextId);
  }

  /**
   * For a page asked for now: what keeps the title of the conversation the
   * client shows one in the page and in the client, once the page is loaded.
   * The client takes the page's title, unless the page may be older than the
   * client's (see `listedTitle`); then the list shows the client's.
   */
  #titles(): (conversations: readonly ConversationSummary[]) => void {
    const client = this.#client;
    if (!client) return () => undefined;
    const show = listedTitle(client);
    return (conversations) => {
      const item = conversations.find((summary) => summary.contextId === client.getSnapshot().contextId);
      if (!item || (typeof item.title !== "string" && item.title !== null)) return;
      show(item.contextId, item.title);
      const { contextId, title } = client.getSnapshot();
      if (contextId === item.contextId && title !== null) this.#retitle(contextId, title);
    };
  }

  #retitle(contextId: string, title: string): void {
    if (!this.#snapshot.conversations.some((item) => item.contextId === contextId && item.title !== title)) return;
    const conversations = this.#snapshot.conversations.map((item) => (item.contextId === contextId ? { ...item, title } : item));
    this.#show({ conversations });
  }

  /** `GET …/contexts?limit=…&cursor=…`. */
  async #page(limit: number, cursor: string | null): Promise<ConversationPage> {
    const query = new URLSearchParams({ limit: String(limit) });
    if (cursor !== null) query.set("cursor", cursor);
    const answer = (await this.#request("GET", `/contexts?${query}`)) as Partial<ConversationPage> | null;
    if (!Array.isArray(answer?.conversations)) {
      throw new ThinwireError("protocol_error", "The conversation list has no conversations.");
    }
    return {
      conversations: answer.conversations.filter(isSummary),
      nextCursor: typeof answer.nextCursor === "string" && answer.nextCursor !== "" ? answer.nextCursor : null,
    };
  }

  /** A rename or a forget: a refusal is shown, then thrown. */
  async #change(method: "PATCH" | "DELETE", contextId: string, body?: RenameRequest): Promise<unknown> {
    try {
      return await this.#request(method, `/contexts/${encodeURIComponent(contextId)}`, body);
    } catch (caught) {
      const error = toThinwireError(caught);
      if (error.code !== "context_not_found" || method !== "DELETE") this.#refused(error);
      throw error;
    }
  }

  /** A rename or a forget refused, by the server or before any request: `error` shows it; returned for the caller to throw. */
  #refused(error: ThinwireError): ThinwireError {
    this.#show({ error: errorInfo(error) });
    return error;
  }

  async #request(method: string, path: string, body?: unknown): Promise<unknown> {
    const { headers, ...target } = requestTarget(this.#options);
    const controller = new AbortController();
    this.#controllers.add(controller);
    try {
      return await requestJson(this.#requests, agentUrl(target, path), { method, headers, body }, controller.signal);
    } finally {
      this.#controllers.delete(controller);
    }
  }

  /** A page that did not load: shown, unless a later refresh made it stale. */
  #failed(caught: unknown, generation: number, settle: () => void): void {
    if (generation !== this.#generation) return;
    settle();
    this.#show({ error: errorInfo(toThinwireError(caught)) });
  }

  /** Shows `changes` in a new snapshot (with `loading` brought up to date), unless nothing changed. */
  #show(changes: Partial<ConversationListSnapshot>): void {
    if (this.#disposed) return;
    const current = this.#snapshot;
    const next = { ...current, ...changes, loading: this.#refreshing !== null || this.#loadingMore !== null };
    const keys = Object.keys(next) as Array<keyof ConversationListSnapshot>;
    if (keys.every((key) => Object.is(next[key], current[key]))) return;
    this.#snapshot = next;
    this.#notifier.changed(false);
  }
}

/** Why `title` cannot be a title (blank, too long), or null when it can. */
function titleRefusal(title: unknown): ThinwireError | null {
  if (typeof title !== "string" || title.trim() === "") return invalidRequest("A title cannot be blank.");
  if ([...title].length > MAX_TITLE) return new ThinwireError("title_too_long", `A title is at most ${MAX_TITLE} characters.`);
  return null;
}

function running(snapshot: Snapshot): boolean {
  return snapshot.status === "streaming" || snapshot.status === "reconnecting";
}

/**
 * The run that waited for a decision ended with no run streaming in its place
 * (a stop, or an answer refused as gone): the question left the conversation shown.
 */
function waitEnded(before: Snapshot, next: Snapshot): boolean {
  return before.interrupt !== null && next.interrupt === null && next.contextId === before.contextId && !running(next);
}

/** Tolerant receiver: an item without an id is no conversation. */
function isSummary(value: unknown): value is ConversationSummary {
  return typeof (value as Partial<ConversationSummary> | null)?.contextId === "string";
}

function emptySummary(contextId: string, title: string): ConversationSummary {
  return { contextId, title, createdAt: 0, updatedAt: 0, turnCount: 0, preview: "", status: "idle" };
}
