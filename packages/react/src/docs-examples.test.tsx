/**
 * The components docs/hook.md shows, rendered as a reader would paste them:
 * each block is read from the page, compiled, and run against this package.
 * (e2e/examples/test_docs_typescript.py checks they type-check; this, what they draw.)
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { cleanup, render, screen, waitFor } from "@testing-library/react";
import { fakeFetch, newLog, transcriptTurn } from "@thinwire/client/testing";
import * as React from "react";
import * as jsxRuntime from "react/jsx-runtime";
import { afterEach, describe, expect, it } from "vitest";
import * as thinwireReact from "./index.js";

const CTX_1 = "ctx-" + "1".repeat(36);

/** The named ```tsx block of docs/hook.md, compiled and loaded as a module. */
async function hookExample(name: string): Promise<Record<string, unknown>> {
  const page = readFileSync(join(import.meta.dirname, "../../../docs/hook.md"), "utf8");
  const block = new RegExp(`^\`\`\`tsx ${name.replace(".", "\\.")}\\n(.*?)^\`\`\``, "ms").exec(page);
  if (!block) throw new Error(`docs/hook.md has no block ${name}`);
  const { default: ts } = await import("typescript");
  const { outputText } = ts.transpileModule(block[1]!, {
    compilerOptions: { module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2022, jsx: ts.JsxEmit.ReactJSX },
  });
  const imports: Record<string, unknown> = {
    react: React,
    "react/jsx-runtime": jsxRuntime,
    "@thinwire/react": thinwireReact,
  };
  const module = { exports: {} as Record<string, unknown> };
  const require = (specifier: string) => {
    if (!(specifier in imports)) throw new Error(`the example imports ${specifier}`);
    return imports[specifier];
  };
  new Function("require", "module", "exports", outputText)(require, module, module.exports);
  return module.exports;
}

afterEach(cleanup);

describe("docs/hook.md's Branches.tsx", () => {
  it("draws the ‹ n/m › arrows once per exchange that has alternatives", async () => {
    const Branches = (await hookExample("Branches.tsx")).Branches as () => React.ReactElement;
    const regenerated = { siblings: 2, siblingIndex: 1 }; // both turns of an exchange carry its count
    const fetch = fakeFetch(
      {
        run: () => ({ frames: [] }),
        transcript: (contextId) => ({
          contextId,
          agent: "demo",
          title: null,
          turns: [
            transcriptTurn("user", "Hi", { id: "turn-000000000000-u0" }),
            transcriptTurn("assistant", "Hello", { id: "turn-000000000000-a0" }),
            transcriptTurn("user", "A joke?", { id: "turn-000100000001-u0", ...regenerated }),
            transcriptTurn("assistant", "Knock knock.", { id: "turn-000100000001-a0", ...regenerated }),
          ],
          activeRunId: null,
          pendingInterrupt: null,
          hasEarlier: false,
        }),
      },
      newLog(),
    );
    const { container } = render(
      <thinwireReact.AgentProvider agent="demo" contextId={CTX_1} fetch={fetch}>
        <Branches />
      </thinwireReact.AgentProvider>,
    );
    await waitFor(() => expect(screen.getByText("Knock knock.")).toBeDefined());
    const arrows = [...container.querySelectorAll("nav")].map((nav) => nav.textContent);
    expect(arrows).toEqual(["‹2/2›"]);
  });
});
