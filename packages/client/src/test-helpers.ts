/** What several test files share; not built into the package (tsconfig.build.json). */
import { expect } from "vitest";
import { ThinwireError } from "./errors.js";

/** The ThinwireError `promise` rejects with; fails the test if it resolves. */
export async function rejection(promise: Promise<unknown>): Promise<ThinwireError> {
  try {
    await promise;
  } catch (error) {
    expect(error).toBeInstanceOf(ThinwireError);
    return error as ThinwireError;
  }
  throw new Error("expected a rejection");
}
