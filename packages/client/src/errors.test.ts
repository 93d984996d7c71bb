/** ThinwireError: the generated codes, a typo caught by the type checker, a newer server's code kept. */
import { describe, expect, it } from "vitest";
import { serverError, ThinwireError } from "./errors.js";
import { ERROR_CODES, type ErrorCode } from "./generated/wire.js";

describe("ThinwireError", () => {
  it("takes only the protocol's codes, and keeps a newer server's code as is", () => {
    // @ts-expect-error a typo in a client error code is a type error
    const typo = new ThinwireError("contxt_busy", "Busy.");
    expect(typo.code).toBe("contxt_busy");
    const newer = serverError("quota_exceeded", "Over quota.", { status: 429, retryable: true });
    expect(newer).toBeInstanceOf(ThinwireError);
    expect(newer).toMatchObject({ code: "quota_exceeded", status: 429, retryable: true });
    const known: ErrorCode = "stream_interrupted";
    expect(ERROR_CODES[known]).toMatch(/done/);
  });
});
