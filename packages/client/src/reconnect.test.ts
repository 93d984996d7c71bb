/** Which failures are tried again: a broken stream is reattached, an unanswered send repeated, a transcript loaded again. */
import { describe, expect, it } from "vitest";
import { ThinwireError, type ThinwireErrorOptions } from "./errors.js";
import type { ErrorCode } from "./generated/wire.js";
import { backoffDelay, isTransient, mayBeUnanswered, reconnectLimits } from "./reconnect.js";

const error = (code: ErrorCode, options: ThinwireErrorOptions = {}) => new ThinwireError(code, code, options);

describe("mayBeUnanswered (a send that got no frame)", () => {
  it.each([
    ["network_error", error("network_error", { retryable: true })],
    ["stream_interrupted", error("stream_interrupted", { retryable: true })],
    ["500 internal_error", error("internal_error", { status: 500 })],
    ["internal_error without a status (WebSocket 1011)", error("internal_error")],
    ["502 from a proxy", error("http_error", { status: 502, retryable: true })],
    ["503 store_unavailable", error("store_unavailable", { status: 503, retryable: true })],
    ["store_unavailable without a status", error("store_unavailable", { retryable: true })],
    ["a retryable store_error", error("store_error", { retryable: true })],
  ])("repeats after %s", (_name, failure) => {
    expect(mayBeUnanswered(failure)).toBe(true);
  });

  it.each([
    ["409 context_busy", error("context_busy", { status: 409, retryable: true })],
    ["context_busy without a status", error("context_busy", { retryable: true })],
    ["429 rate_limited", error("rate_limited", { status: 429, retryable: true })],
    ["too_many_streams without a status", error("too_many_streams", { retryable: true })],
    ["too_many_runs without a status", error("too_many_runs", { retryable: true })],
    ["503 too_many_streams", error("too_many_streams", { status: 503, retryable: true })],
    ["400 invalid_request", error("invalid_request", { status: 400 })],
    ["a 4xx marked retryable", error("http_error", { status: 408, retryable: true })],
    ["409 decision_pending", error("decision_pending", { status: 409 })],
    ["401 unauthenticated", error("unauthenticated")],
    ["protocol_error", error("protocol_error", { status: 200 })],
    ["aborted", error("aborted")],
  ])("shows %s", (_name, failure) => {
    expect(mayBeUnanswered(failure)).toBe(false);
  });
});

describe("isTransient (a transcript's GET, safe to repeat)", () => {
  it.each([
    ["network_error", error("network_error", { retryable: true })],
    ["500 internal_error", error("internal_error", { status: 500 })],
    ["internal_error without a status", error("internal_error")],
    ["502 from a proxy", error("http_error", { status: 502, retryable: true })],
    ["a 5xx not marked retryable", error("http_error", { status: 504 })],
    ["503 store_unavailable", error("store_unavailable", { status: 503, retryable: true })],
    ["store_unavailable without a status", error("store_unavailable")],
    ["429 rate_limited", error("rate_limited", { status: 429, retryable: true })],
    ["a 4xx marked retryable", error("http_error", { status: 408, retryable: true })],
  ])("tries again after %s", (_name, failure) => {
    expect(isTransient(failure)).toBe(true);
  });

  it.each([
    ["404 context_not_found", error("context_not_found", { status: 404 })],
    ["400 invalid_context_id", error("invalid_context_id", { status: 400 })],
    ["401 unauthenticated", error("unauthenticated", { status: 401 })],
    ["protocol_error", error("protocol_error", { status: 200 })],
    ["protocol_mismatch", error("protocol_mismatch", { status: 200 })],
    ["aborted", error("aborted")],
  ])("shows %s", (_name, failure) => {
    expect(isTransient(failure)).toBe(false);
  });
});

describe("backoffDelay", () => {
  it("doubles from the base delay up to the cap", () => {
    const limits = reconnectLimits();
    expect([0, 1, 2, 3, 4, 5, 6].map((attempt) => backoffDelay(attempt, limits))).toEqual([
      250, 500, 1000, 2000, 4000, 5000, 5000,
    ]);
  });
});
