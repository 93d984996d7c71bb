// Client bundle sizes for `make bench`: each entry bundled by esbuild for the browser,
// minified, React left out (every app has it), then gzipped. @thinwire/* come from the
// built packages (packages/*/dist), the AI SDK from this folder's node_modules.
//
//   node src/sizes.mjs   ->   JSON on stdout: [{name, entry, minBytes, gzipBytes}]
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";

import * as esbuild from "esbuild";

import { thinwirePackages } from "./thinwire-packages.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const ENTRIES = [
  // What a chat page imports: the hook (and whatever it pulls in).
  ["thinwire: useAgent", 'export { useAgent } from "@thinwire/react";'],
  ["ai-sdk: useChat", 'export { useChat } from "@ai-sdk/react";'],
  // Every export of both packages.
  ["thinwire: all of client + react", 'export * from "@thinwire/client"; export * from "@thinwire/react";'],
  ["ai-sdk: all of ai + @ai-sdk/react", 'export * from "ai"; export * from "@ai-sdk/react";'],
];

async function size(name, contents) {
  const result = await esbuild.build({
    stdin: { contents, resolveDir: here, loader: "js" },
    bundle: true,
    minify: true,
    format: "esm",
    platform: "browser",
    target: "es2022",
    external: ["react", "react-dom", "react/jsx-runtime"],
    plugins: [thinwirePackages],
    define: { "process.env.NODE_ENV": '"production"' },
    write: false,
    logLevel: "silent",
  });
  const code = result.outputFiles[0].contents;
  return { name, minBytes: code.length, gzipBytes: gzipSync(code, { level: 9 }).length };
}

const versions = Object.fromEntries(
  ["ai", "@ai-sdk/react"].map((name) => [
    name,
    JSON.parse(readFileSync(path.join(here, "..", "node_modules", name, "package.json"), "utf8")).version,
  ]),
);
const sizes = [];
for (const [name, contents] of ENTRIES) {
  try {
    sizes.push(await size(name, contents));
  } catch (error) {
    sizes.push({ name, error: String(error.message ?? error).split("\n")[0] });
  }
}
process.stdout.write(JSON.stringify({ versions, sizes }) + "\n");
