import type { RefObject } from "react";
import { MESSAGE_BOX_ID } from "./Composer";

/**
 * The page's first stop for the keyboard, shown only while focused: past the
 * conversation list, into the message box. It focuses the box, which following
 * the link to its fragment would not.
 */
export function SkipToMessageBox({ box }: { box: RefObject<HTMLTextAreaElement | null> }) {
  return (
    <a
      className="skip-link"
      href={`#${MESSAGE_BOX_ID}`}
      data-testid="skip-to-message"
      onClick={(event) => {
        event.preventDefault();
        box.current?.focus();
      }}
    >
      Skip to message box
    </a>
  );
}
