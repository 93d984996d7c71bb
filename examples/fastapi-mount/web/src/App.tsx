import { useState, type FormEvent } from "react";
import { ThinwireError, useAgent } from "@thinwire/react";

/** Failures after which the message may have reached the server: not offered again. */
const MAYBE_SENT = new Set(["network_error", "stream_interrupted", "aborted"]);

export default function App() {
  // The agents are mounted under /api of the FastAPI app (see main.py).
  const { turns, status, error, send, clearError } = useAgent({
    agent: "echo",
    baseUrl: "/api",
    persist: { userId: "me" },
  });
  const [draft, setDraft] = useState("");
  const busy = status === "streaming" || status === "reconnecting";

  function submit(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    const text = draft;
    setDraft("");
    // A failure shows in `error`. A message refused (too long, say) comes back to the box
    // to fix; one that may have reached the server (the connection failed) does not.
    send(text).catch((failure: unknown) => {
      if (!(failure instanceof ThinwireError) || !MAYBE_SENT.has(failure.code)) setDraft(text);
    });
  }

  return (
    <main>
      <h1>Echo</h1>
      <p role="status">{status}</p>
      {turns.map((turn) => (
        <p key={turn.id} className={turn.role}>
          {turn.text}
        </p>
      ))}
      {error && (
        <p role="alert">
          {error.message} <button onClick={clearError}>Dismiss</button>
        </p>
      )}
      <form onSubmit={submit}>
        <input aria-label="Message" value={draft} onChange={(event) => setDraft(event.target.value)} />
        <button disabled={busy || draft.trim() === ""}>Send</button>
      </form>
    </main>
  );
}
