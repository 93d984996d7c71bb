import { useEffect, useState, type FormEvent } from "react";
import { useChat } from "@ai-sdk/react";
import { lastAssistantMessageIsCompleteWithToolCalls } from "ai";
import { loadMessages, saveContextId, savedContextId, stopOnServer, transport, type ChatMessage } from "./chat.ts";
import { MessageView } from "./MessageView.tsx";

export default function App() {
  // A conversation this browser had: its messages come from the server, then useChat
  // resumes the reply still streaming, if one is.
  const [contextId] = useState(savedContextId);
  const [messages, setMessages] = useState<ChatMessage[] | null>(contextId ? null : []);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    if (contextId) loadMessages(contextId).then(setMessages, (e: Error) => setError(e.message));
  }, [contextId]);
  if (error) return <p role="alert">{error}</p>;
  if (messages === null) return <p role="status">loading</p>;
  return <Chat id={contextId ?? undefined} initialMessages={messages} />;
}

function Chat({ id, initialMessages }: { id?: string; initialMessages: ChatMessage[] }) {
  const { id: chatId, messages, setMessages, sendMessage, regenerate, resumeStream, status, error, stop, addToolOutput, clearError } = useChat<ChatMessage>({
    id,
    messages: initialMessages,
    transport,
    resume: true,
    // An answered `interrupt` goes to the server as soon as it has its output.
    sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithToolCalls,
  });
  const [draft, setDraft] = useState("");

  // Keep the conversation's id as soon as the server names it (the first reply's start).
  const contextId = messages.findLast((message) => message.metadata?.contextId)?.metadata?.contextId;
  useEffect(() => {
    if (contextId) saveContextId(contextId);
  }, [contextId]);

  // An answer refused as the question is gone (another tab answered it first) leaves this
  // list behind the server's: load it as a reload does, and resume the reply that answer
  // continued, if it still streams. The refusal stays shown until dismissed or the next
  // message (a resume clears useChat's error).
  const [gone, setGone] = useState<string | null>(null);
  useEffect(() => {
    if (!error || !QUESTION_GONE.includes(refusal(error).code)) return;
    setGone(readable(error));
    loadMessages(chatId).then((loaded) => {
      setMessages(loaded);
      resumeStream().catch(() => {});
    }, () => {}); // not loaded: the question stays, and the error says why
  }, [error, chatId, setMessages, resumeStream]);
  const shownError = error ? readable(error) : gone;

  const busy = status === "submitted" || status === "streaming";
  const last = messages.at(-1);

  function submit(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    sendMessage({ text: draft }).catch(() => {}); // a failure shows in `error`
    setDraft("");
    setGone(null);
  }

  async function stopReply() {
    // useChat's stop() only aborts the fetch: thinwire would go on with a run nobody
    // watches (a reload could resume it). Stopped on the server, the run's stream ends by
    // itself, with the last words and the server's finish; stop() is for when it could not be.
    if (!(await stopOnServer(chatId))) await stop();
  }

  return (
    <main>
      <header>
        <h1>Orders assistant</h1>
        <span role="status">{status}</span>
      </header>
      <ol aria-label="Conversation">
        {messages.map((message) => (
          <MessageView
            key={message.id}
            message={message}
            busy={busy}
            latest={message === last}
            answer={(toolCallId, output) => addToolOutput({ tool: "interrupt", toolCallId, output })}
          />
        ))}
      </ol>
      {shownError && (
        <p role="alert">
          {shownError}{" "}
          <button
            onClick={() => {
              clearError();
              setGone(null);
            }}
          >
            Dismiss
          </button>
        </p>
      )}
      <form onSubmit={submit}>
        <input
          aria-label="Message"
          placeholder="Ask about order 1234, or for a refund"
          value={draft}
          onChange={(event) => setDraft(event.target.value)}
        />
        <button disabled={busy || draft.trim() === ""}>Send</button>
        {/* Only once the reply streams: while `submitted` the run may not have started on
            the server, which would then have nothing to stop, and the run would go on unseen. */}
        <button type="button" disabled={status !== "streaming"} onClick={() => void stopReply()}>
          Stop
        </button>
        {/* The latest reply again, beside the one it replaces (thinwire keeps both); not
            while a question waits, which the server would refuse (decision_pending). */}
        <button
          type="button"
          disabled={busy || last?.role !== "assistant" || last.parts.at(-1)?.type === "tool-interrupt"}
          onClick={() => {
            setGone(null);
            regenerate().catch(() => {});
          }}
        >
          Regenerate
        </button>
      </form>
    </main>
  );
}

/** The server's codes for an answer to a question no longer asked. */
const QUESTION_GONE: unknown[] = ["interrupt_answered", "interrupt_not_found"];

/** The server's refusal: the transport hands over its body as it came, JSON. */
function refusal(error: Error): { code?: unknown; message?: unknown } {
  try {
    return (JSON.parse(error.message) as { error?: { code?: unknown; message?: unknown } }).error ?? {};
  } catch {
    return {}; // not the server's JSON: a network failure, say
  }
}

/** What a refusal says. */
function readable(error: Error): string {
  const { message } = refusal(error);
  return typeof message === "string" ? message : error.message;
}
