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

/** One signed-in user's conversation with the demo agent. */
export function Chat({ user, onUserChange }: ChatProps) {
  const options = useMemo(() => ({ agent: "demo", persist: { userId: user } }), [user]);
  const { turns, thinking, activity, status, error, send, reset } = useAgent(options);
  const streaming = status === "streaming";

  const handleSend = useCallback(
    (text: string) => {
      // Failures are surfaced through the hook's `error`; swallow the
      // rejection here so it never becomes an unhandled rejection.
      send(text).catch(() => undefined);
    },
    [send],
  );

  return (
    <div className="app">
      <Header user={user} status={status} onUserChange={onUserChange} onNewConversation={reset} />
      <main className="conversation">
        <MessageList turns={turns} busy={streaming} />
        <ThinkingPanel text={thinking} />
        <ActivityList items={activity} />
        {error ? <ErrorBanner error={error} /> : null}
      </main>
      <Composer disabled={streaming} onSend={handleSend} />
      <Footer />
    </div>
  );
}
