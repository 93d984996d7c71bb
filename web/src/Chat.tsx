import { useCallback, useMemo, useRef, useState, type RefObject } from "react";
import { AgentProvider, ThinwireError, useAgent } from "@thinwire/react";
import { Header } from "./components/Header";
import { MessageList } from "./components/MessageList";
import { ThinkingPanel } from "./components/ThinkingPanel";
import { ActivityList } from "./components/ActivityList";
import { ErrorBanner } from "./components/ErrorBanner";
import { ApprovalCard } from "./components/ApprovalCard";
import { Composer } from "./components/Composer";
import { Footer } from "./components/Footer";
import { ConversationSidebar } from "./components/ConversationSidebar";
import { LoadEarlier } from "./components/LoadEarlier";
import { SkipToMessageBox } from "./components/SkipToMessageBox";
import type { TurnActions } from "./components/TurnView";
import type { DemoUser } from "./users";
import { useFollowBottom } from "./follow-bottom";

interface ChatProps {
  user: DemoUser;
  onUserChange: (user: DemoUser) => void;
}

/** Failures after which the message may have reached the server: not put back in the box. */
const MAYBE_SENT = new Set(["network_error", "stream_interrupted", "aborted"]);

/** `?transport=websocket` picks the WebSocket transport (the e2e suite uses it); SSE otherwise. */
function transportFromUrl(search: string = window.location.search): "sse" | "websocket" {
  return new URLSearchParams(search).get("transport") === "websocket" ? "websocket" : "sse";
}

/** `?pageSize=N` shows a resumed conversation N exchanges at a time (1–1000); the hook's default otherwise. */
function pageSizeFromUrl(search: string = window.location.search): number | undefined {
  const pageSize = Number(new URLSearchParams(search).get("pageSize"));
  return Number.isInteger(pageSize) && pageSize >= 1 && pageSize <= 1000 ? pageSize : undefined;
}

/**
 * One signed-in user's conversations with the demo agent. The provider owns the
 * conversation shown; the page, the approval card and the error banner each
 * read it with `useAgent()`, and the sidebar lists the user's conversations
 * with `useConversations()`, picking the one the provider shows.
 */
export function Chat({ user, onUserChange }: ChatProps) {
  const messageBox = useRef<HTMLTextAreaElement>(null);
  return (
    <AgentProvider agent="demo" persist={{ userId: user }} transport={transportFromUrl()} pageSize={pageSizeFromUrl()}>
      <SkipToMessageBox box={messageBox} />
      <div className="shell">
        <ConversationSidebar />
        <Conversation user={user} onUserChange={onUserChange} messageBox={messageBox} />
      </div>
    </AgentProvider>
  );
}

function Conversation({ user, onUserChange, messageBox }: ChatProps & { messageBox: RefObject<HTMLTextAreaElement | null> }) {
  const { turns, thinking, activity, status, interrupt, title, send, stop, regenerate, edit, switchBranch } = useAgent();
  // A reply is under way (maybe reconnecting): it can be stopped, and nothing else sent.
  const replying = status === "streaming" || status === "reconnecting";
  // A run waits for a decision: it is answered on the approval card, or stopped; nothing else is sent.
  const waiting = interrupt !== null;
  const { contentRef, follow } = useFollowBottom(turns[0]?.id, turns[turns.length - 1]?.id);
  // An edit refused before its run began (too long, the conversation busy): its text goes
  // back in its box, as a refused message goes back in the composer.
  const [refusedEdit, setRefusedEdit] = useState<TurnActions["refusedEdit"]>(null);

  const handleSend = useCallback(
    (text: string) => {
      follow();
      // Failures are surfaced through the hook's `error`. A message refused before its
      // run started goes back to the box; one that may have reached the server does not.
      return send(text).then(
        () => true,
        (failure: unknown) => failure instanceof ThinwireError && MAYBE_SENT.has(failure.code),
      );
    },
    [send, follow],
  );

  const handleStop = useCallback(() => {
    stop().catch(() => undefined);
  }, [stop]);

  // A control that goes away (an answer given, an error dismissed) hands the focus to
  // the message box, where the user goes on, rather than dropping it on the page's body.
  const focusMessageBox = useCallback(() => messageBox.current?.focus(), [messageBox]);
  const answers = useRef<HTMLDivElement>(null);
  const showQuestion = useCallback(() => answers.current?.querySelector<HTMLElement>("input, button")?.focus(), []);

  // Branches: regenerate the last reply, edit a message, show another alternative.
  const actions = useMemo<TurnActions>(
    () => ({
      enabled: !replying && !waiting,
      // Regenerate turns off, and an edit's box goes, as they start: the focus goes on.
      onRegenerate: () => {
        focusMessageBox();
        void regenerate().catch(() => undefined);
      },
      onEdit: (turnId, text) => {
        setRefusedEdit(null);
        focusMessageBox();
        edit(turnId, text).catch((failure: unknown) => {
          if (!(failure instanceof ThinwireError && MAYBE_SENT.has(failure.code))) setRefusedEdit({ turnId, text });
        });
      },
      onBranch: (turnId, index) => void switchBranch(turnId, index).catch(() => undefined),
      refusedEdit,
      onEditClosed: () => setRefusedEdit(null),
    }),
    [replying, waiting, regenerate, edit, switchBranch, refusedEdit, focusMessageBox],
  );

  return (
    <div className="app" ref={contentRef}>
      <Header user={user} status={status} waiting={waiting} title={title} onUserChange={onUserChange} />
      <main className="conversation">
        {/* Keyed by the first turn: a page shown, or another conversation, starts it afresh. */}
        <LoadEarlier key={turns[0]?.id} />
        <MessageList turns={turns} busy={replying} actions={actions} />
        {/* Live while a run streams; each finished reply keeps its own under "Details". */}
        {replying ? <ThinkingPanel text={thinking} /> : null}
        {replying ? <ActivityList items={activity} /> : null}
        <ApprovalCard answersRef={answers} onDecided={focusMessageBox} />
        <ErrorBanner onDismissed={focusMessageBox} />
        {/* In the main landmark: what the user does here is the page's purpose. */}
        <Composer
          boxRef={messageBox}
          disabled={replying || waiting}
          blocker={waiting && !replying ? { reason: "Answer the question above first.", show: showQuestion } : null}
          stoppable={replying || waiting}
          replying={replying}
          onSend={handleSend}
          onStop={handleStop}
        />
      </main>
      <Footer />
    </div>
  );
}
