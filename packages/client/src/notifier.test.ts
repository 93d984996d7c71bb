/** The Notifier: batched and immediate notifications, and the cap on their rate. */
import { describe, expect, it } from "vitest";

import { Notifier } from "./notifier.js";

describe("Notifier", () => {
  /** A notifier over a hand-fired scheduler and a hand-moved clock. */
  function setup(minInterval?: number) {
    let clock = 0;
    const scheduled: Array<() => void> = [];
    const notifier = new Notifier((flush) => scheduled.push(flush), {
      ...(minInterval === undefined ? {} : { minInterval }),
      now: () => clock,
    });
    const notified: number[] = [];
    notifier.subscribe(() => notified.push(clock));
    const fire = (at: number) => {
      clock = at;
      for (const flush of scheduled.splice(0)) flush();
    };
    return { notifier, notified, scheduled, fire };
  }

  it("batches changes into the next scheduled flush", () => {
    const { notifier, notified, fire } = setup();
    notifier.changed(true);
    notifier.changed(true);
    expect(notified).toEqual([]);
    fire(1);
    expect(notified).toEqual([1]);
    notifier.changed(true);
    fire(2); // without minInterval every flush that has changes notifies
    expect(notified).toEqual([1, 2]);
  });

  it("keeps a scheduled flush minInterval from the last notification, immediate ones included", () => {
    const { notifier, notified, scheduled, fire } = setup(16);
    notifier.changed(false); // a status change at 0: at once
    notifier.changed(true);
    fire(8); // too soon after 0: waits for the next flush
    expect(notified).toEqual([0]);
    expect(scheduled).toHaveLength(1);
    fire(16);
    expect(notified).toEqual([0, 16]);
    notifier.changed(true);
    fire(24);
    fire(33);
    expect(notified).toEqual([0, 16, 33]);
    expect(scheduled).toHaveLength(0); // nothing left to announce, nothing rescheduled
  });

  it("lets an immediate notification carry a waiting batch", () => {
    const { notifier, notified, scheduled, fire } = setup(16);
    notifier.changed(false);
    notifier.changed(true);
    fire(4);
    notifier.changed(false); // at 4, carrying the batched change
    expect(notified).toEqual([0, 4]);
    fire(30); // the flush still scheduled finds nothing to announce
    expect(notified).toEqual([0, 4]);
    expect(scheduled).toHaveLength(0);
  });
});
