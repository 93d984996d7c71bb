import { useState, type FormEvent } from "react";
import { useAgent } from "@thinwire/react";

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
    send(draft).catch(() => {}); // a failure shows in `error`
    setDraft("");
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
