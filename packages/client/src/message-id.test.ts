/** The messageId of a send: random from the platform's cryptographic generator, in the wire's pattern. */
import { afterEach, describe, expect, it, vi } from "vitest";
import { newMessageId } from "./message-id.js";

const MESSAGE_ID = /^[A-Za-z0-9_.:-]{8,64}$/;

describe("newMessageId", () => {
  afterEach(() => vi.restoreAllMocks());
  afterEach(() => vi.unstubAllGlobals());

  it("is a UUID where crypto.randomUUID exists, new every time", () => {
    const random = vi.spyOn(Math, "random");
    const ids = Array.from({ length: 100 }, () => newMessageId());
    for (const id of ids) expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    for (const id of ids) expect(id).toMatch(MESSAGE_ID);
    expect(new Set(ids).size).toBe(100);
    expect(random).not.toHaveBeenCalled();
  });

  it("is 128 bits in hex from getRandomValues where randomUUID is missing (an insecure context)", () => {
    const real = globalThis.crypto;
    const getRandomValues = vi.fn((array: Uint8Array) => real.getRandomValues(array));
    vi.stubGlobal("crypto", { getRandomValues });
    const random = vi.spyOn(Math, "random");
    const id = newMessageId();
    expect(id).toMatch(/^[0-9a-f]{32}$/);
    expect(id).toMatch(MESSAGE_ID);
    expect(getRandomValues).toHaveBeenCalledTimes(1);
    expect(newMessageId()).not.toBe(id);
    expect(random).not.toHaveBeenCalled();
  });

  it("is null without cryptographic randomness, never Math.random", () => {
    vi.stubGlobal("crypto", undefined);
    const random = vi.spyOn(Math, "random");
    expect(newMessageId()).toBeNull();
    expect(random).not.toHaveBeenCalled();
  });
});
