import { useCallback } from "react";
import { AgentProvider, useAgent } from "@thinwire/react";
import { Header } from "./components/Header";
import { MessageList } from "./components/MessageList";
import { ThinkingPanel } from "./components/ThinkingPanel";
import { ActivityList } from "./components/ActivityList";
import { ErrorBanner } from "./components/ErrorBanner";
import { ApprovalCard } from "./components/ApprovalCard";
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

/**
 * One signed-in user's conversation with the demo agent. The provider owns the
 * conversation; the page, the approval card and the error banner each read it
 * with `useAgent()`.
 */
export function Chat({ user, onUserChange }: ChatProps) {
  return (
    <AgentProvider agent="demo" persist={{ userId: user }} transport={transportFromUrl()}>
      <Conversation user={user} onUserChange={onUserChange} />
    </AgentProvider>
  );
}

function Conversation({ user, onUserChange }: ChatProps) {
  const { turns, thinking, activity, status, interrupt, send, stop, reset } = useAgent();
  // A reply is under way (maybe reconnecting): it can be stopped, and nothing else sent.
  const replying = status === "streaming" || status === "reconnecting";
  // A run waits for a decision: it is answered on the approval card, or stopped; nothing else is sent.
  const waiting = interrupt !== null;

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
        <MessageList turns={turns} busy={replying} awaitingDecision={waiting} />
        <ThinkingPanel text={thinking} />
        <ActivityList items={activity} />
        <ApprovalCard />
        <ErrorBanner />
      </main>
      <Composer disabled={replying || waiting} stoppable={replying || waiting} onSend={handleSend} onStop={handleStop} />
      <Footer />
    </div>
  );
}
