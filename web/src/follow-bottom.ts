import { useCallback, useEffect, useRef } from "react";

/** How close to the bottom, in pixels, still counts as being at it. */
const NEAR_BOTTOM = 48;

function distanceFromBottom(): number {
  const root = document.documentElement;
  return root.scrollHeight - (window.scrollY + window.innerHeight);
}

/**
 * The page's very bottom: the composer there sits in its place in the flow, below
 * everything the conversation shows, so nothing is hidden under it.
 */
function scrollToBottom(): void {
  window.scrollTo({ top: document.documentElement.scrollHeight, behavior: "instant" });
}

/**
 * Keeps the newest content in view as it grows — a reply streaming in, a question and
 * its buttons, the live panels — while the reader is at the bottom, as chats do. A
 * reader who scrolls up to read is left there until they scroll back down, send, or
 * open another conversation. Attach `contentRef` to the element that grows; call
 * `follow()` when the user sends.
 *
 * `firstId` and `lastId` are the first and last turns shown: both changed is another
 * conversation (followed from its end); only the first, an earlier page shown above
 * (the reader is reading back: no longer followed).
 */
export function useFollowBottom(firstId: string | undefined, lastId: string | undefined) {
  const contentRef = useRef<HTMLDivElement>(null);
  const following = useRef(true);
  const lastScrollY = useRef(0);

  useEffect(() => {
    const onScroll = () => {
      const y = window.scrollY;
      if (distanceFromBottom() <= NEAR_BOTTOM) following.current = true;
      else if (y < lastScrollY.current) following.current = false; // scrolled up, to read
      lastScrollY.current = y;
    };
    window.addEventListener("scroll", onScroll, { passive: true });
    return () => window.removeEventListener("scroll", onScroll);
  }, []);

  useEffect(() => {
    const content = contentRef.current;
    if (!content) return;
    const observer = new ResizeObserver(() => {
      // A scroll up whose event is still to come counts already.
      if (window.scrollY < lastScrollY.current) following.current = false;
      if (following.current) scrollToBottom();
    });
    observer.observe(content);
    return () => observer.disconnect();
  }, []);

  const shown = useRef({ firstId, lastId });
  useEffect(() => {
    const before = shown.current;
    shown.current = { firstId, lastId };
    if (before.firstId === firstId) return; // a turn added at the end, or none
    if (before.lastId === lastId) {
      following.current = false; // an earlier page, above
    } else {
      following.current = true; // another conversation
      scrollToBottom();
    }
  }, [firstId, lastId]);

  const follow = useCallback(() => {
    following.current = true;
    scrollToBottom();
  }, []);

  return { contentRef, follow };
}
