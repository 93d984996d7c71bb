/**
 * The shape of a conversation id: `ctx-` and 36 lowercase hex digits, as the
 * server mints them (`invalid_context_id` refuses any other). An id of
 * another shape — mistyped, cut short, garbage in storage — names no
 * conversation, so the client forgets it as it forgets an unknown one,
 * without asking the server.
 */
const CONTEXT_ID = /^ctx-[0-9a-f]{36}$/;

export function isContextId(value: string): boolean {
  return CONTEXT_ID.test(value);
}
