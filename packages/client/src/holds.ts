/**
 * Holds: this client's requests that hold the conversation on the server
 * without reading a run — a branch switch (`POST …/branch`), the stop of a
 * run waiting for a decision — while each is on its way.
 *
 * The server holds a conversation for each of them as it does for a run, and
 * refuses whatever else needs that hold meanwhile with `context_busy`. The
 * client is free all the same (they read no run): a send, a decision, a
 * regeneration, an edit or another switch is taken at once and shows what it
 * shows, but makes its request only once they are answered — else it would
 * be refused for the client's own request, a few milliseconds old.
 */
import { aborted } from "./errors.js";

export class Holds {
  readonly #pending = new Set<Promise<void>>();

  /**
   * `request` holds the conversation until it settles, or until `signal`
   * fires (its job cancelled: a reset, another conversation); passed through.
   */
  add<T>(request: Promise<T>, signal: AbortSignal): Promise<T> {
    const over = settled(request, signal);
    this.#pending.add(over);
    void over.then(() => this.#pending.delete(over));
    return request;
  }

  /**
   * Resolves once every request that holds the conversation settled; throws
   * `aborted` once `signal` fired, waits included.
   */
  async released(signal: AbortSignal): Promise<void> {
    while (this.#pending.size > 0 && !signal.aborted) await settled(Promise.all(this.#pending), signal);
    if (signal.aborted) throw aborted();
  }
}

/** Resolves once `promise` settles, whichever way, or `signal` fires. */
function settled(promise: Promise<unknown>, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const over = () => {
      signal.removeEventListener("abort", over);
      resolve();
    };
    signal.addEventListener("abort", over, { once: true });
    promise.then(over, over);
  });
}
