/**
 * Tabs: what the clients of one origin that share a `tabChannel` — the tabs
 * of one user — tell each other, over a BroadcastChannel: a run of theirs
 * began or ended in a conversation, or the list of conversations changed (a
 * rename, a forget, a branch shown). Ids only, never a turn's text: what a tab
 * hears, it reads from the server itself. Where there is no BroadcastChannel
 * (an older browser, some workers), nothing is told and nothing heard.
 */

export type TabNews =
  /** A run this tab reads began (its `run_start` came) or ended. */
  | { run: "started" | "ended"; contextId: string; runId: string }
  /** The server lists the conversations otherwise: read the list again. */
  | { list: "changed" };

export class Tabs {
  #channel: BroadcastChannel | null;

  /** Joins the channel `name`; `hear` is told what the other clients on it tell. */
  constructor(name: string, hear: (news: TabNews) => void) {
    const Channel = globalThis.BroadcastChannel;
    this.#channel = typeof Channel === "function" ? new Channel(name) : null;
    if (this.#channel) {
      this.#channel.onmessage = (event: MessageEvent) => {
        const news = tabNews(event.data);
        if (news) hear(news);
      };
    }
  }

  tell(news: TabNews): void {
    try {
      this.#channel?.postMessage(news);
    } catch {
      // A closed channel: the other tabs learn of it as they would without one.
    }
  }

  close(): void {
    this.#channel?.close();
    this.#channel = null;
  }
}

/** Tolerant receiver: news of another version's shape is none. */
function tabNews(data: unknown): TabNews | null {
  const news = data as Partial<Record<string, unknown>> | null;
  if (news?.list === "changed") return { list: "changed" };
  const { run, contextId, runId } = news ?? {};
  if ((run !== "started" && run !== "ended") || typeof contextId !== "string" || typeof runId !== "string") return null;
  return { run, contextId, runId };
}
