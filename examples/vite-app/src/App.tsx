import { useState, type FormEvent } from "react";
import { AgentProvider, ThinwireError, useAgent } from "@thinwire/react";
import { Approval } from "./Approval.tsx";

/** Failures after which the message may have reached the server: not offered again. */
const MAYBE_SENT = new Set(["network_error", "stream_interrupted", "aborted"]);

// Replies stream over SSE; open the page with ?transport=websocket to use one WebSocket.
const transport = new URLSearchParams(location.search).get("transport") === "websocket" ? "websocket" : "sse";

// A reply cut short says so. (One that paused for a decision shows the Approval card.)
const ENDINGS: Partial<Record<string, string>> = { stopped: "stopped", error: "failed" };

export default function App() {
  // One conversation for everything below it: the chat and its approval card share it.
  // `persist` keeps the conversation's id, and nothing else, in localStorage, so a
  // reload picks the conversation up again from the server.
  return (
    <AgentProvider agent="assistant" persist={{ userId: "me" }} transport={transport}>
      <Chat />
    </AgentProvider>
  );
}

function Chat() {
  const { turns, thinking, activity, status, error, interrupt, send, stop, reset, clearError } = useAgent();
  const [draft, setDraft] = useState("");
  // While a reply streams, Send waits. After an error it may send again (that clears it).
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
      <header>
        <h1>Orders assistant</h1>
        <span role="status">{status}</span>
        <button type="button" onClick={reset}>
          New conversation
        </button>
      </header>
      <ol aria-label="Conversation">
        {turns.map((turn) => (
          <li key={turn.id} className={turn.role} aria-busy={turn.streaming}>
            {turn.text}
            {turn.stopReason && ENDINGS[turn.stopReason] && <small> ({ENDINGS[turn.stopReason]})</small>}
          </li>
        ))}
      </ol>
      {thinking && (
        <details open>
          <summary>Thinking</summary>
          {thinking}
        </details>
      )}
      {activity.length > 0 && (
        <ul aria-label="Tools">
          {activity.map((call) => (
            <li key={call.callId}>
              {call.name}: {call.state}
            </li>
          ))}
        </ul>
      )}
      <Approval />
      {error && (
        <p role="alert">
          {error.message} <button onClick={clearError}>Dismiss</button>
        </p>
      )}
      <form onSubmit={submit}>
        <input
          aria-label="Message"
          placeholder="Ask about order 1234, or for a refund"
          value={draft}
          onChange={(event) => setDraft(event.target.value)}
        />
        <button disabled={busy || interrupt !== null || draft.trim() === ""}>Send</button>
        <button type="button" disabled={!busy && interrupt === null} onClick={() => stop().catch(() => {})}>
          Stop
        </button>
      </form>
    </main>
  );
}
