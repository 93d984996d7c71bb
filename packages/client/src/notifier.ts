/**
 * The listener half of the store: notifies at once, or batches a burst of
 * changes into one notification through a caller-given scheduler (an
 * animation frame, say). A pending batch is carried by the next immediate
 * notification, so nothing is ever left unannounced.
 */
export type Schedule = (flush: () => void) => void;

export class Notifier {
  readonly #listeners = new Set<() => void>();
  readonly #schedule: Schedule | undefined;
  #dirty = false;
  #scheduled = false;
  #closed = false;

  constructor(schedule?: Schedule) {
    this.#schedule = schedule;
  }

  subscribe(listener: () => void): () => void {
    if (this.#closed) return () => undefined;
    this.#listeners.add(listener);
    return () => {
      this.#listeners.delete(listener);
    };
  }

  /** Announces a change: at once, or with the next scheduled flush when `batch` and a scheduler is set. */
  changed(batch: boolean): void {
    this.#dirty = true;
    if (!batch || !this.#schedule) {
      this.#flush();
      return;
    }
    if (this.#scheduled) return;
    this.#scheduled = true;
    this.#schedule(() => {
      this.#scheduled = false;
      this.#flush();
    });
  }

  /** Drops every listener; later changes notify no one. */
  close(): void {
    this.#closed = true;
    this.#listeners.clear();
  }

  #flush(): void {
    if (!this.#dirty || this.#closed) return;
    this.#dirty = false;
    for (const listener of [...this.#listeners]) listener();
  }
}
