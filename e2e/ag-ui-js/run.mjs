// What a CopilotKit-style client does with a thinwire agent, with AG-UI's own HttpAgent:
// runs the steps given, in one thread, and prints every event received, the agent's
// messages after each step, and every warning the client logged (it warns when it
// strips what the protocol does not describe), as JSON, for e2e/test_ag_ui_js.py.
//
//   node run.mjs http://127.0.0.1:8000/ag-ui/demo '[{"say": "hello"}, {"answer": "approve"}]' [threadId]
//
// Steps: {"say": text} sends a message; {"answer": value} answers the pending interrupt
// and {"cancel": true} abandons it (`resume`); {"connect": true} opens the thread in a new
// agent, as a reloaded page would.
import { randomUUID } from "node:crypto";
import { HttpAgent, buildResumeArray, runHttpRequest, transformHttpEventStream } from "@ag-ui/client";

/** HttpAgent, with AG-UI's `connect` (which HttpAgent leaves to subclasses) on thinwire's route. */
class ThinwireAgent extends HttpAgent {
  connect(input) {
    const request = runHttpRequest(() => this.fetch(`${this.url}/connect`, this.requestInit(input)));
    return transformHttpEventStream(request, this.debugLogger);
  }
}

const [url, script, threadId] = process.argv.slice(2);
const warnings = [];
for (const level of ["warn", "error"]) {
  console[level] = (...args) => warnings.push(args.map(String).join(" "));
}

let agent = new ThinwireAgent({ url, threadId: threadId || undefined });
const steps = [];
for (const step of JSON.parse(script)) {
  const events = [];
  const subscriber = { onEvent: ({ event }) => void events.push(event) };
  let error = null;
  try {
    if (step.say !== undefined) {
      agent.addMessage({ id: randomUUID(), role: "user", content: step.say });
      await agent.runAgent({}, subscriber);
    } else if (step.answer !== undefined || step.cancel) {
      const [pending] = agent.pendingInterrupts;
      const response = step.cancel ? { status: "cancelled" } : { status: "resolved", payload: step.answer };
      const resume = buildResumeArray(agent.pendingInterrupts, { [pending.id]: response });
      await agent.runAgent({ resume }, subscriber);
    } else if (step.connect) {
      agent = new ThinwireAgent({ url, threadId: agent.threadId });
      await agent.connectAgent({}, subscriber);
    }
  } catch (caught) {
    error = String(caught);
  }
  const { messages, pendingInterrupts } = agent;
  steps.push(structuredClone({ events, error, messages, pendingInterrupts }));
}
console.log(JSON.stringify({ threadId: agent.threadId, steps, warnings }));
