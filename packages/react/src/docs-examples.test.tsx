/**
 * The components docs/hook.md shows, rendered as a reader would paste them:
 * each block is read from the page, compiled, and run against this package.
 * (e2e/examples/test_docs_typescript.py checks they type-check; this, what they draw.)
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { act, cleanup, fireEvent, render, screen, waitFor } from "@testing-library/react";
import type { InterruptRequest } from "@thinwire/client";
import { fakeFetch, newLog, runFrames, type Script, transcriptTurn } from "@thinwire/client/testing";
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

describe("docs/hook.md's AccessibleChat.tsx", () => {
  const refund: InterruptRequest = {
    interruptId: "int-1",
    prompt: "Refund $40 on order 1234?",
    options: ["approve", "reject"],
    payload: null,
    decisionSchema: null,
  };

  async function renderChat(script: Script) {
    const AccessibleChat = (await hookExample("AccessibleChat.tsx")).AccessibleChat as () => React.ReactElement;
    render(
      <thinwireReact.AgentProvider agent="demo" fetch={fakeFetch(script, newLog())}>
        <AccessibleChat />
      </thinwireReact.AgentProvider>,
    );
    const box = screen.getByRole("textbox", { name: "Message" });
    fireEvent.change(box, { target: { value: "A refund, please" } });
    fireEvent.click(screen.getByRole("button", { name: "Send" }));
    return box;
  }

  it("keeps the log busy and its cursor unread while a reply streams, and the focus on the box after an answer", async () => {
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const box = await renderChat({
      run: () => {
        const r = runFrames(CTX_1, "run-1");
        async function* frames() {
          yield r.start({ turnId: "turn-000000000000-a0", userTurnId: "turn-000000000000-u0" });
          yield r.token("Let me check.");
          await held;
          yield r.interrupt(refund);
          yield r.done("Let me check.", [], "interrupted");
        }
        return { frames: frames() };
      },
      decide: () => {
        const r = runFrames(CTX_1, "run-2", 10);
        return { frames: [r.start(), r.token("Refunded."), r.done("Refunded.")] };
      },
    });
    const log = screen.getByRole("log", { name: "Conversation" });
    await waitFor(() => expect(log.textContent).toContain("Let me check."));
    expect(log.getAttribute("aria-busy")).toBe("true");
    const cursor = [...log.querySelectorAll("p")].at(-1)!.lastElementChild!;
    expect(cursor.getAttribute("aria-hidden")).toBe("true");

    await act(async () => release());
    const approve = await screen.findByRole("button", { name: "approve" });
    expect(screen.getByRole("group", { name: "Refund $40 on order 1234?" }).contains(approve)).toBe(true);
    expect(log.getAttribute("aria-busy")).toBe("false");
    expect(log.querySelector('[aria-hidden="true"]')).toBeNull();
    approve.focus();
    fireEvent.click(approve);
    expect(document.activeElement).toBe(box);
    await waitFor(() => expect(log.textContent).toContain("Refunded."));
  });

  it("shows a failure as an alert, and gives the focus back to the box when it is dismissed", async () => {
    const box = await renderChat({ run: () => ({ error: { status: 400, code: "bad_request", message: "No such thing." } }) });
    const alert = await screen.findByRole("alert");
    expect(alert.textContent).toContain("No such thing.");
    const dismiss = screen.getByRole("button", { name: "Dismiss" });
    dismiss.focus();
    fireEvent.click(dismiss);
    expect(screen.queryByRole("alert")).toBeNull();
    expect(document.activeElement).toBe(box);
  });
});
