import type { StopResult } from "./generated/wire.js";

/**
 * A job: one send, decision, regeneration, edit or branch switch, a run found
 * in progress (by `start()`, or a transcript loaded again), or a side request
 * beside them (a stop of a waiting run, an earlier page). It is
 * cancelled as a whole (`abort`, by `reset()` and `dispose()`), and it knows
 * how to stop its run once the server has announced it: a `stop()` asked for
 * before that waits, and goes out as soon as the run is known. Once its run
 * is over the client may start the next job while this one finishes up;
 * from then on (`superseded`) the view is the next one's. A stop the server
 * answers with no run going on ends the stream being read (`reading`): it
 * would bring nothing more, and the reader attaches again.
 */
export class Job {
  readonly #controller = new AbortController();
  #stopRun: (() => Promise<void>) | null = null;
  #waiting: Array<{ resolve: () => void; reject: (error: unknown) => void }> = [];
  #superseded = false;
  #endStream: (() => void) | null = null;

  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  /** A later job began: this one changes the view no more (a refresh after its run is dropped). */
  get superseded(): boolean {
    return this.#superseded;
  }

  supersede(): void {
    this.#superseded = true;
  }

  /** The server has announced the run, so a stop can name it. */
  get runKnown(): boolean {
    return this.#stopRun !== null;
  }

  /** The run is known and `stopRun` stops it; stops asked for meanwhile go out now. */
  runStarted(stopRun: () => Promise<StopResult | void>): void {
    if (this.#stopRun) return;
    this.#stopRun = async () => {
      const answer = await stopRun();
      if (answer && !answer.stopping) this.#endStream?.();
    };
    const waiting = this.#waiting.splice(0);
    if (waiting.length === 0) return;
    const request = this.#stopRun();
    for (const stop of waiting) request.then(stop.resolve, stop.reject);
  }

  /** A stream of the run is being read, and `end` ends it; null: none is. */
  reading(end: (() => void) | null): void {
    this.#endStream = end;
  }

  /** Stops the run: now if it is known, else once it is; resolves at once if the job ends first. */
  stop(): Promise<void> {
    if (this.#stopRun) return this.#stopRun();
    return new Promise<void>((resolve, reject) => this.#waiting.push({ resolve, reject }));
  }

  /** Cancels the job. */
  abort(): void {
    this.#controller.abort();
    this.finish();
  }

  /** The job is over: a stop still waiting for the run has nothing left to stop. */
  finish(): void {
    for (const stop of this.#waiting.splice(0)) stop.resolve();
  }
}
