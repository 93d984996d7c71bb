/**
 * The listener half of the store: notifies at once, or batches a burst of
 * changes into one notification through a caller-given scheduler (an
 * animation frame, say). A pending batch is carried by the next immediate
 * notification, so nothing is ever left unannounced.
 *
 * With `minInterval`, a scheduled flush that comes sooner than that after the
 * previous notification (immediate ones included) waits for the next one the
 * scheduler gives: a cap on notifications per second that holds on a 120 Hz
 * display as on a 60 Hz one, and counts the status changes too.
 */
export type Schedule = (flush: () => void) => void;

export interface NotifierOptions {
  /** Milliseconds a scheduled flush keeps from the previous notification. */
  minInterval?: number;
  /** The clock, in milliseconds (`performance.now` by default). */
  now?: () => number;
}

export class Notifier {
  readonly #listeners = new Set<() => void>();
  readonly #schedule: Schedule | undefined;
  readonly #minInterval: number;
  readonly #now: () => number;
  #dirty = false;
  #scheduled = false;
  #closed = false;
  #lastNotified = Number.NEGATIVE_INFINITY;

  constructor(schedule?: Schedule, options: NotifierOptions = {}) {
    this.#schedule = schedule;
    this.#minInterval = options.minInterval ?? 0;
    this.#now = options.now ?? (() => performance.now());
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
    this.#schedule(this.#scheduledFlush);
  }

  /** Drops every listener; later changes notify no one. */
  close(): void {
    this.#closed = true;
    this.#listeners.clear();
  }

  readonly #scheduledFlush = (): void => {
    if (this.#dirty && !this.#closed && this.#now() - this.#lastNotified < this.#minInterval) {
      this.#schedule?.(this.#scheduledFlush); // too soon: the next one
      return;
    }
    this.#scheduled = false;
    this.#flush();
  };

  #flush(): void {
    if (!this.#dirty || this.#closed) return;
    this.#dirty = false;
    if (this.#minInterval > 0) this.#lastNotified = this.#now();
    for (const listener of [...this.#listeners]) listener();
  }
}
