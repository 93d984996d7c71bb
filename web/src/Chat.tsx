import { useCallback, useMemo } from "react";
import { useAgent } from "@thinwire/react";
import { Header } from "./components/Header";
import { MessageList } from "./components/MessageList";
import { ThinkingPanel } from "./components/ThinkingPanel";
import { ActivityList } from "./components/ActivityList";
import { ErrorBanner } from "./components/ErrorBanner";
import { Composer } from "./components/Composer";
import { Footer } from "./components/Footer";
import type { DemoUser } from "./users";

interface ChatProps {
  user: DemoUser;
  onUserChange: (user: DemoUser) => void;
}

/** `?transport=websocket` picks the WebSocket transport (the e2e suite uses it); SSE otherwise. */
function transportFromUrl(search: string = window.location.search): "sse" | "websocket" {
  return new URLSearchParams(search).get("transport") === "websocket" ? "websocket" : "sse";
}

/** One signed-in user's conversation with the demo agent. */
export function Chat({ user, onUserChange }: ChatProps) {
  const options = useMemo(
    () => ({ agent: "demo", persist: { userId: user }, transport: transportFromUrl() }),
    [user],
  );
  const { turns, thinking, activity, status, error, send, stop, reset } = useAgent(options);
  // A reply is under way (maybe reconnecting): it can be stopped, and nothing else sent.
  const replying = status === "streaming" || status === "reconnecting";

  const handleSend = useCallback(
    (text: string) => {
      // Failures are surfaced through the hook's `error`; swallow the
      // rejection here so it never becomes an unhandled rejection.
      send(text).catch(() => undefined);
    },
    [send],
  );

  const handleStop = useCallback(() => {
    stop().catch(() => undefined);
  }, [stop]);

  return (
    <div className="app">
      <Header user={user} status={status} onUserChange={onUserChange} onNewConversation={reset} />
      <main className="conversation">
        <MessageList turns={turns} busy={replying} />
        <ThinkingPanel text={thinking} />
        <ActivityList items={activity} />
        {error ? <ErrorBanner error={error} /> : null}
      </main>
      <Composer disabled={replying} onSend={handleSend} onStop={handleStop} />
      <Footer />
    </div>
  );
}
