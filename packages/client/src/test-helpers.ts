/** What several test files share; not built into the package (tsconfig.build.json). */
import { readFileSync } from "node:fs";
import type { CompilerOptions } from "typescript";
import { expect } from "vitest";
import { ThinwireError } from "./errors.js";
import type { InterruptRequest } from "./generated/wire.js";
import { SseTransport } from "./sse-transport.js";
import { fakeFetch, fakeWebSocket, type Script, type ServerLog } from "./testing/index.js";
import type { Transport } from "./transport.js";
import { WebSocketTransport } from "./websocket-transport.js";

/** The question the tests' runs ask a person: "Refund?", approve or reject. */
export const refund: InterruptRequest = {
  interruptId: "int-1",
  prompt: "Refund?",
  options: ["approve", "reject"],
  payload: null,
  decisionSchema: null,
};

/** A way to reach one fake server: its transport for runs, and the fetch for the rest. */
export type Wire = (script: Script, log: ServerLog) => { transport: Transport; fetch: typeof fetch };

/** Every wire, by name: SSE, and a WebSocket (transcripts and branch switches over HTTP either way). */
export const wires: Array<[string, Wire]> = [
  ["sse", (script, log) => {
    const fetch = fakeFetch(script, log);
    return { transport: new SseTransport({ fetch }), fetch };
  }],
  ["websocket", (script, log) => ({
    transport: new WebSocketTransport({ WebSocket: fakeWebSocket(script, log).WebSocket }),
    fetch: fakeFetch(script, log),
  })],
];

/** The ThinwireError `promise` rejects with; fails the test if it resolves. */
export async function rejection(promise: Promise<unknown>): Promise<ThinwireError> {
  try {
    await promise;
  } catch (error) {
    expect(error).toBeInstanceOf(ThinwireError);
    return error as ThinwireError;
  }
  throw new Error("expected a rejection");
}

/**
 * The `.d.ts` files a package's build (its `tsconfig.build.json`) writes, by
 * path, emitted in memory. `options` override the config's; `files` are read
 * as if they were on disk (another package's declarations, say).
 */
export async function emittedDeclarations(
  tsconfig: string,
  options: CompilerOptions = {},
  files: ReadonlyMap<string, string> = new Map(),
): Promise<Map<string, string>> {
  return emitted(tsconfig, { ...options, emitDeclarationOnly: true }, files);
}

/** The `.js` files a package's build writes, by path, emitted in memory (unchecked, as `isolatedModules` allows). */
export async function emittedJavaScript(tsconfig: string, options: CompilerOptions = {}): Promise<Map<string, string>> {
  const js = await emitted(tsconfig, { ...options, declaration: false });
  return new Map([...js].filter(([path]) => path.endsWith(".js")));
}

async function emitted(
  tsconfig: string,
  options: CompilerOptions,
  files: ReadonlyMap<string, string> = new Map(),
): Promise<Map<string, string>> {
  const { default: ts } = await import("typescript"); // loaded by the tests that need it only
  const config = ts.getParsedCommandLineOfConfigFile(tsconfig, options, {
    ...ts.sys,
    onUnRecoverableConfigFileDiagnostic: (diagnostic) => {
      throw new Error(ts.flattenDiagnosticMessageText(diagnostic.messageText, "\n"));
    },
  })!;
  const emitOptions = { ...config.options, noEmit: false, noCheck: true };
  const program = ts.createProgram(config.fileNames, emitOptions, await hostWith(emitOptions, files));
  const out = new Map<string, string>();
  program.emit(undefined, (path, text) => void out.set(path, text));
  return out;
}

/**
 * The errors of `consumer`, a file written at `path`, compiled as a Node.js
 * project would (`lib: ["ES2023"]`, `types: ["node"]`, strict: no DOM) against
 * the `declarations`; `paths` as in compilerOptions, `strictness` more
 * options a project may set (`exactOptionalPropertyTypes`). The declarations are read
 * as `.ts` files: checked in full, while skipLibCheck spares the time
 * @types/node would take.
 */
export async function nodeProjectErrors(
  path: string,
  consumer: string,
  declarations: ReadonlyMap<string, string>,
  paths: Record<string, string[]> = {},
  strictness: CompilerOptions = {},
): Promise<string[]> {
  const { default: ts } = await import("typescript");
  const options: CompilerOptions = {
    ...strictness,
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    lib: ["lib.es2023.d.ts"],
    types: ["node"],
    strict: true,
    skipLibCheck: true,
    noEmit: true,
    paths,
  };
  const sources = new Map([...declarations].map(([file, text]) => [file.replace(/\.d\.ts$/, ".ts"), text]));
  sources.set(path, consumer);
  const program = ts.createProgram([path], options, await hostWith(options, sources));
  return ts.getPreEmitDiagnostics(program).map((diagnostic) => {
    const where = diagnostic.file ? `${diagnostic.file.fileName}: ` : "";
    return where + ts.flattenDiagnosticMessageText(diagnostic.messageText, "\n");
  });
}

/** A compiler host that reads `files` (by absolute path) before the disk. */
async function hostWith(options: CompilerOptions, files: ReadonlyMap<string, string>) {
  const { default: ts } = await import("typescript");
  const host = ts.createCompilerHost(options);
  const { fileExists, readFile, getSourceFile } = host;
  host.fileExists = (file) => files.has(file) || fileExists.call(host, file);
  // A folder that holds only files in memory (`dist` before a build) exists too.
  host.directoryExists = (folder) =>
    [...files.keys()].some((file) => file.startsWith(`${folder}/`)) || ts.sys.directoryExists(folder);
  host.readFile = (file) => files.get(file) ?? readFile.call(host, file);
  host.getSourceFile = (file, language, ...rest) => {
    const text = files.get(file);
    return text === undefined ? getSourceFile.call(host, file, language, ...rest) : ts.createSourceFile(file, text, language);
  };
  return host;
}

/**
 * Every conditional entry of a package's `exports` has `types`, `import` and a
 * `default` that is the same ESM file, so `require()` (Node's require(esm), CJS
 * test runners) resolves the package as `import` does.
 */
export function expectRequireResolvesAsImport(manifestUrl: URL): void {
  const manifest = JSON.parse(readFileSync(manifestUrl, "utf8")) as {
    exports: Record<string, string | Record<string, string>>;
  };
  const entries = Object.entries(manifest.exports).filter(([, target]) => typeof target !== "string");
  expect(entries.length).toBeGreaterThan(0);
  for (const [entry, conditions] of entries) {
    expect({ entry, conditions: Object.keys(conditions) }).toEqual({ entry, conditions: ["types", "import", "default"] });
    expect({ entry, target: (conditions as Record<string, string>).default }).toEqual({
      entry,
      target: (conditions as Record<string, string>).import,
    });
  }
}

/**
 * The package declares the Node.js the README names: 20.19, the first that
 * `require()`s an ES module without a flag (what `expectRequireResolvesAsImport`
 * relies on).
 */
export function expectNodeEngine(manifestUrl: URL): void {
  const manifest = JSON.parse(readFileSync(manifestUrl, "utf8")) as { engines?: Record<string, string> };
  expect(manifest.engines).toEqual({ node: ">=20.19" });
  const readme = readFileSync(new URL("../../../README.md", import.meta.url), "utf8");
  expect(readme).toContain("Node ≥ 20.19");
}
