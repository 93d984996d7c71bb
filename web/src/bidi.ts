/**
 * Bidi controls: overrides, embeddings, isolates and marks (the server drops the same from
 * titles, prompts and options). Invisible, they reorder the text around them: an override
 * makes "0001$" read "$1000", an isolate with marks swaps two names. A reply repeats what
 * anyone wrote (a web page, a tool's output), so the page drops them where it shows text;
 * what the server keeps and sends is left as it is.
 */
const BIDI_CONTROLS = /[\u202A-\u202E\u2066-\u2069\u200E\u200F\u061C]/g;

/** Text to show: in the order its characters are in. Give its element `dir="auto"`, so
 * right-to-left text still takes its direction, from its first letter. */
export function shownText(text: string): string {
  return text.replace(BIDI_CONTROLS, "");
}
