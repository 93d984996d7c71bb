// What a CopilotKit-style client does with a thinwire agent, with AG-UI's own HttpAgent:
// runs the steps given, in one thread, and prints every event received, the agent's
// messages after each step, and every warning the client logged (it warns when it
// strips what the protocol does not describe), as JSON, for e2e/test_ag_ui_js.py.
//
//   node run.mjs http://127.0.0.1:8000/ag-ui/demo '[{"say": "hello"}, {"answer": "approve"}]' [threadId]
//
// Steps: {"say": text} sends a message, and with "then": "stop" (`stop()` below) or
// "abort" (`abortRun()`) cuts its run short at the reply's first word; {"answer": value}
// answers the pending interrupt and {"cancel": true} abandons it (`resume`); {"stop": true}
// is `stop()` between runs; {"stopOnServer": true} posts thinwire's stop itself, as another
// tab would; {"connect": true} opens the thread in a new agent, as a reloaded page would,
// and {"connect": "again"} in this one; {"signIn": user} signs in to the demo, whose
// identify reads the cookie the agent then sends in its headers.
import { randomUUID } from "node:crypto";
import { HttpAgent, buildResumeArray, runHttpRequest, transformHttpEventStream } from "@ag-ui/client";

// ThinwireAgent and stop() are docs/interop.md's example, in JavaScript: keep them in step.

/** HttpAgent, with AG-UI's `connect` (which HttpAgent leaves to subclasses) on thinwire's route. */
class ThinwireAgent extends HttpAgent {
  connect(input) {
    this.abortController = new AbortController(); // as runAgent() does: abortRun() spent the last
    const request = runHttpRequest(() => this.fetch(`${this.url}/connect`, this.requestInit(input)));
    return transformHttpEventStream(request, this.debugLogger);
  }
}

/** thinwire's stop: a question waiting for its answer is cancelled (`resume`), which clears
 *  `pendingInterrupts`; a run is stopped on the server, and its fetch aborted only when that
 *  stopped nothing. */
async function stop(agent) {
  if (!agent.isRunning && agent.pendingInterrupts.length > 0) {
    const resume = agent.pendingInterrupts.map(({ id }) => ({ interruptId: id, status: "cancelled" }));
    await agent.runAgent({ resume });
    return;
  }
  const init = { method: "POST", headers: agent.headers };
  const response = await agent.fetch(`${agent.url}/threads/${agent.threadId}/stop`, init).catch(() => null);
  const stopped = response?.ok && (await response.json()).stopping;
  if (!stopped) agent.abortRun();
}

const [url, script, threadId] = process.argv.slice(2);
const warnings = [];
for (const level of ["warn", "error"]) {
  console[level] = (...args) => warnings.push(args.map(String).join(" "));
}

/** The step's run, cut short at its first word if it says so. */
async function say(agent, step) {
  agent.addMessage({ id: randomUUID(), role: "user", content: step.say });
  let cut = null;
  const cutter = {
    onTextMessageContentEvent: () => {
      if (step.then && !cut) cut = step.then === "stop" ? stop(agent) : Promise.resolve(agent.abortRun());
    },
  };
  await agent.runAgent({}, cutter);
  await cut;
}

async function act(agent, step) {
  if (step.say !== undefined) {
    await say(agent, step);
  } else if (step.answer !== undefined || step.cancel) {
    const [pending] = agent.pendingInterrupts;
    const response = step.cancel ? { status: "cancelled" } : { status: "resolved", payload: step.answer };
    const resume = buildResumeArray(agent.pendingInterrupts, { [pending.id]: response });
    await agent.runAgent({ resume });
  } else if (step.stop) {
    await stop(agent);
  } else if (step.stopOnServer) {
    const init = { method: "POST", headers: agent.headers };
    const response = await fetch(`${agent.url}/threads/${agent.threadId}/stop`, init);
    if (!response.ok) throw new Error(`stop: HTTP ${response.status}`);
  } else if (step.connect) {
    await agent.connectAgent();
  } else if (step.signIn !== undefined) {
    const login = await fetch(new URL("/demo/login", url), {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ user: step.signIn }),
    });
    agent.headers = { ...agent.headers, cookie: login.headers.get("set-cookie").split(";")[0] };
  }
}

let agent = new ThinwireAgent({ url, threadId: threadId || undefined });
const steps = [];
for (const step of JSON.parse(script)) {
  if (step.connect === true) {
    agent = new ThinwireAgent({ url, threadId: agent.threadId, headers: agent.headers });
  }
  const events = [];
  const subscription = agent.subscribe({ onEvent: ({ event }) => void events.push(event) });
  let error = null;
  try {
    await act(agent, step);
  } catch (caught) {
    error = String(caught);
  } finally {
    subscription.unsubscribe();
  }
  const { messages, pendingInterrupts } = agent;
  steps.push(structuredClone({ events, error, messages, pendingInterrupts }));
}
console.log(JSON.stringify({ threadId: agent.threadId, steps, warnings }));
