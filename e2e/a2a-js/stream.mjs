// What another team's Node agent does with a thinwire agent, with the official A2A
// client: resolve the card, stream a message (in a conversation, when a context id is
// given). Prints the card and every event as ProtoJSON, for e2e/test_a2a_js.py.
//
//   node stream.mjs http://127.0.0.1:8000/a2a/demo/ "hello" [ctx-…]
import { randomUUID } from "node:crypto";
import { AgentCard, Role, StreamResponse } from "@a2a-js/sdk";
import { AgentCardResolver, ClientFactory } from "@a2a-js/sdk/client";

const [baseUrl, text, contextId = ""] = process.argv.slice(2);
const card = await AgentCardResolver.default.resolve(baseUrl);
const client = await new ClientFactory().createFromAgentCard(card);
const message = {
  messageId: randomUUID(),
  contextId,
  role: Role.ROLE_USER,
  parts: [{ content: { $case: "text", value: text } }],
};
const events = [];
for await (const event of client.sendMessageStream({ message })) {
  events.push(StreamResponse.toJSON(event));
}
console.log(JSON.stringify({ card: AgentCard.toJSON(card), events }));
