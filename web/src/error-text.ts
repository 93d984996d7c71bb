/** An error as the hooks show it: a stable code and the server's (or client's) message. */
export interface ShownError {
  code: string;
  message: string;
  retryable: boolean;
}

export interface ErrorText {
  /** What happened and what to do, for the person using the page. */
  text: string;
  /** The server log's reference ("err-…"), which support needs; null when there is none. */
  reference: string | null;
}

const BUSY_SERVER = "The server is busy right now. Wait a moment and try again.";
const TOO_LONG = "Your message is too long to send. Shorten it and send it again.";

/** A sentence per code a user of the demo can meet; other codes show the message as it came. */
const TEXTS: Partial<Record<string, string>> = {
  agent_error: "The agent ran into a problem and could not finish this reply. Try again, or ask something else.",
  store_error: "The reply could not be saved. Try again.",
  internal_error: "Something went wrong on the server. Try again.",
  context_busy: "Another tab is replying in this conversation. Wait for it to finish, then send again.",
  branch_moved: "This conversation changed in another tab. It has been reloaded: send your message again.",
  context_not_found: "This conversation was deleted. Your next message starts a new one.",
  decision_pending: "Answer the question above first.",
  interrupt_answered: "That question was already answered, maybe in another tab.",
  interrupt_not_found: "That question is no longer waiting for an answer.",
  invalid_decision: "That answer is not one the question accepts.",
  message_too_large: TOO_LONG,
  body_too_large: TOO_LONG,
  data_too_large: TOO_LONG,
  rate_limited: "You are sending messages too quickly. Wait a few seconds and try again.",
  too_many_runs: BUSY_SERVER,
  server_busy: BUSY_SERVER,
  store_unavailable: BUSY_SERVER,
  too_many_streams: "Too many tabs are following replies at once. Close one and try again.",
  network_error: "The server cannot be reached. Check your connection and try again.",
  stream_interrupted: "The connection dropped before the reply finished. Reload the page to see it.",
  run_interrupted: "The server restarted before the reply finished. Send your message again.",
  unauthenticated: "You are signed out. Reload the page to sign in again.",
  title_too_long: "A title can be at most 200 characters.",
};

const REFERENCE = /\berr-[0-9a-f]+\b/;

/** What to tell the user about `error`; the code itself stays for developers to show aside. */
export function describeError(error: ShownError): ErrorText {
  const reference = REFERENCE.exec(error.message)?.[0] ?? null;
  const known = TEXTS[error.code];
  if (known) return { text: known, reference };
  const retry = error.retryable ? " You can try again." : "";
  return { text: `${sentence(error.message)}${retry}`, reference: null };
}

/** The message as a sentence: capitalised, ending in a full stop. */
function sentence(message: string): string {
  const text = message.trim();
  if (!text) return "Something went wrong.";
  const capitalised = text.charAt(0).toUpperCase() + text.slice(1);
  return /[.!?]$/.test(capitalised) ? capitalised : `${capitalised}.`;
}
