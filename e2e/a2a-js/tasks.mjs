// The official A2A client reading a thinwire agent's tasks: `listTasks` as a caller
// writes it, with no status (the SDK sends one all the same), and the error `getTask`
// raises for a task that does not exist, as a caller gets to read it. Prints JSON, for
// e2e/test_a2a_js.py.
//
//   node tasks.mjs http://127.0.0.1:8000/a2a/demo/
import { ListTasksResponse } from "@a2a-js/sdk";
import { ClientFactory } from "@a2a-js/sdk/client";

const [baseUrl] = process.argv.slice(2);
const client = await new ClientFactory().createFromUrl(baseUrl);
const listed = [];
for (const params of [{}, { pageSize: 5 }]) {
  listed.push(ListTasksResponse.toJSON(await client.listTasks(params)));
}
let missing = null;
try {
  await client.getTask({ id: `ctx-${"0".repeat(36)}.turn-000000000000-u0` });
} catch (error) {
  missing = { name: error.name, data: error.data, metadata: error.metadata ?? null };
}
console.log(JSON.stringify({ listed, missing }));
