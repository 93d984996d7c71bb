import { useEffect, useState } from "react";

/** Which agent answers: the scripted demo, or a model (`thinwire demo --model …`). */
interface About {
  agent: "scripted" | "model";
  model: string | null;
}

export function Footer() {
  const [about, setAbout] = useState<About | null>(null);
  useEffect(() => {
    const controller = new AbortController();
    fetch("demo/about", { signal: controller.signal })
      .then((response) => (response.ok ? (response.json() as Promise<About>) : null))
      .then(setAbout, () => undefined);
    return () => controller.abort();
  }, []);
  return (
    <footer className="footer">
      <p>Memory lives on the server; this page stores only the conversation id.</p>
      {about && (
        <p data-testid="agent-kind">
          {about.agent === "model" ? `Answering: the model ${about.model}` : "Answering: the scripted demo agent (no model)"}
        </p>
      )}
    </footer>
  );
}
