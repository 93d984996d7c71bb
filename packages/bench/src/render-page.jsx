// The render-count page of `make bench`: useAgent against a thinwire server whose agent
// streams fast, with every commit of the chat counted by a layout effect (React's
// <Profiler> reports nothing in a production build). The bench drives it through
// `window.bench`: `await bench.run(deltas)` sends one message and returns what was
// counted while the reply streamed.
import { useAgent } from "@thinwire/react";
import { useEffect, useLayoutEffect } from "react";
import { createRoot } from "react-dom/client";

const commits = [];
let sendMessage = null;

function Chat() {
  const { turns, status, send } = useAgent({ agent: "paced", contextId: null });
  useEffect(() => {
    sendMessage = send;
  }, [send]);
  // No dependencies: runs after every commit that rendered the chat.
  useLayoutEffect(() => {
    commits.push(performance.now());
  });
  return (
    <main>
      <p id="status">{status}</p>
      {turns.map((turn) => (
        <p key={turn.id} className={turn.role}>
          {turn.text}
        </p>
      ))}
    </main>
  );
}

window.bench = {
  ready: () => sendMessage !== null,
  async run(deltas) {
    commits.length = 0;
    const began = performance.now();
    const result = await sendMessage(String(deltas));
    const ended = performance.now();
    const reply = document.querySelector("p.assistant:last-of-type")?.textContent ?? "";
    return { began, ended, commits: [...commits], replyLength: reply.length, stopReason: result?.stopReason ?? null };
  },
};

createRoot(document.getElementById("root")).render(<Chat />);
