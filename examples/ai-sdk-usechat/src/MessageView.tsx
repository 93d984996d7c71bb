import type { ChatMessage, Decision } from "./chat.ts";

type Props = {
  message: ChatMessage;
  busy: boolean;
  /** The conversation's last message. */
  latest: boolean;
  answer: (toolCallId: string, output: Decision) => void;
};

/** One message: its text, the agent's thinking, its tools (name and state: thinwire keeps
 * their arguments and outputs), and a question the agent waits on, one button per answer. */
export function MessageView({ message, busy, latest, answer }: Props) {
  return (
    <li className={message.role}>
      {message.parts.map((part, index) => {
        switch (part.type) {
          case "text":
            return <p key={index}>{part.text}</p>;
          case "reasoning":
            return (
              <details key={index} open>
                <summary>Thinking</summary>
                {part.text}
              </details>
            );
          case "dynamic-tool":
            return (
              <p key={index} className="tool">
                {part.toolName}: {part.state}
              </p>
            );
          case "tool-interrupt": {
            // An answer nothing came after was refused (the error says why: 400
            // invalid_decision for one that does not fit): the question is open again.
            const refused =
              part.state === "output-available" && latest && !busy && index === message.parts.length - 1;
            if (part.state !== "input-available" && !refused) {
              return (
                <p key={index} className="tool">
                  {part.input?.prompt} {part.state === "output-available" ? shown(part.output) : ""}
                </p>
              );
            }
            return (
              <section key={index} aria-label="Approval">
                <p>{part.input.prompt}</p>
                {part.input.options?.map((option) => (
                  <button key={option} disabled={busy} onClick={() => answer(part.toolCallId, option)}>
                    {option}
                  </button>
                ))}
              </section>
            );
          }
          default:
            return null;
        }
      })}
    </li>
  );
}

function shown(decision: Decision): string {
  return typeof decision === "string" ? decision : JSON.stringify(decision);
}
