import { DefaultChatTransport, type JSONValue, type UIDataTypes, type UIMessage } from "ai";

/** The agent's chat endpoint: `useChat` posts here and resumes at `${API}/${id}/stream`. */
export const API = "/ai-sdk/assistant/chat";

/** What thinwire asks the page when the agent needs a decision (the input of its
 * `interrupt` tool part). The answer is the tool's output (a `Decision`). */
export type Interrupt = {
  interruptId: string;
  prompt: string;
  options: string[] | null;
  payload: unknown;
  decisionSchema: Record<string, unknown> | null;
};

/** The metadata thinwire puts on a reply: its conversation, and why it ended. */
export type ReplyMetadata = { contextId?: string; stopReason?: string };

/** An answer: one of the question's `options`, or a value that fits its `decisionSchema`
 * (an object, as a rule). */
export type Decision = JSONValue;

export type ChatMessage = UIMessage<ReplyMetadata, UIDataTypes, { interrupt: { input: Interrupt; output: Decision } }>;

// thinwire keeps the conversation: send it the new message only, never the history, and
// what the SDK says of it: `trigger` (a send, or regenerate()) and `messageId` (the
// message regenerate() names). Without them a regenerate reads as a resent message.
export const transport = new DefaultChatTransport<ChatMessage>({
  api: API,
  prepareSendMessagesRequest: ({ id, messages, trigger, messageId }) => ({
    body: { id, message: messages[messages.length - 1], trigger, messageId },
  }),
});

// The page keeps one thing: the id of its conversation (localStorage, per user).
const KEY = "thinwire:assistant:me:contextId";

export function savedContextId(): string | null {
  return localStorage.getItem(KEY);
}

export function saveContextId(contextId: string): void {
  localStorage.setItem(KEY, contextId);
}

/** The conversation so far, from the server, for `useChat({ messages })` after a reload. */
export async function loadMessages(chatId: string): Promise<ChatMessage[]> {
  const response = await fetch(`${API}/${chatId}/messages`);
  if (!response.ok) throw new Error(await response.text());
  return (await response.json()) as ChatMessage[];
}

/** thinwire's stop: the run ends on the server, its partial reply kept, and its stream
 * ends with it. False when the server had nothing to stop, or could not be asked. */
export async function stopOnServer(chatId: string): Promise<boolean> {
  try {
    const response = await fetch(`${API}/${chatId}/stop`, { method: "POST" });
    return response.ok && ((await response.json()) as { stopping: boolean }).stopping;
  } catch {
    return false;
  }
}
