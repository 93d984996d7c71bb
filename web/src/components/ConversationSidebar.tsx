import { useState, type FormEvent, type KeyboardEvent } from "react";
import { useConversations } from "@thinwire/react";
import { ErrorMessage } from "./ErrorMessage";

/**
 * The signed-in user's conversations with the demo agent, most recently active
 * first. It shares the page's AgentProvider: picking one shows it in the chat,
 * and the list refreshes whenever a reply finishes.
 */
export function ConversationSidebar() {
  const { conversations, loading, error, hasMore, loadMore, rename, remove, selected, select, create } = useConversations();
  const [renaming, setRenaming] = useState<string | null>(null);
  const [deleting, setDeleting] = useState<string | null>(null);

  return (
    <nav className="sidebar" aria-label="Conversations" data-testid="conversations">
      <div className="sidebar__header">
        <h2 className="sidebar__heading">Conversations</h2>
        <button
          type="button"
          className="button button--secondary"
          data-testid="conversation-new"
          aria-label="New conversation"
          title="Start a new conversation"
          onClick={create}
        >
          New
        </button>
      </div>
      {error ? (
        <p className="sidebar__error" role="alert" data-testid="conversations-error" data-code={error.code}>
          <ErrorMessage error={error} />
        </p>
      ) : null}
      {conversations.length === 0 && !loading ? <p className="sidebar__empty">No conversations yet.</p> : null}
      <ul className="sidebar__list">
        {conversations.map((item) => {
          const current = item.contextId === selected;
          return (
            <li
              key={item.contextId}
              className={`sidebar__item${current ? " sidebar__item--selected" : ""}`}
              data-testid="conversation-item"
              data-context-id={item.contextId}
              data-selected={String(current)}
              data-status={item.status}
              aria-current={current ? "true" : undefined}
            >
              {renaming === item.contextId ? (
                <RenameForm
                  initial={item.title ?? ""}
                  onCancel={() => setRenaming(null)}
                  onSave={(title) => {
                    setRenaming(null);
                    rename(item.contextId, title).catch(() => undefined); // shown in `error`
                  }}
                />
              ) : (
                <button type="button" className="sidebar__select" data-testid="conversation-select" onClick={() => void select(item.contextId)}>
                  <span className="sidebar__title" data-testid="conversation-title">
                    {item.title ?? "Untitled"}
                  </span>
                  <span className="sidebar__preview" data-testid="conversation-preview">
                    {item.preview}
                  </span>
                </button>
              )}
              {deleting === item.contextId ? (
                <ConfirmDelete
                  onCancel={() => setDeleting(null)}
                  onConfirm={() => {
                    setDeleting(null);
                    remove(item.contextId).catch(() => undefined); // shown in `error`
                  }}
                />
              ) : (
                <div className="sidebar__actions">
                  <button
                    type="button"
                    className="icon-button"
                    data-testid="conversation-rename"
                    aria-label={`Rename “${item.title ?? "Untitled"}”`}
                    title="Rename"
                    onClick={() => setRenaming(item.contextId)}
                  >
                    ✎
                  </button>
                  <button
                    type="button"
                    className="icon-button"
                    data-testid="conversation-forget"
                    aria-label={`Delete “${item.title ?? "Untitled"}”`}
                    title="Delete: forget it on the server"
                    onClick={() => setDeleting(item.contextId)}
                  >
                    ×
                  </button>
                </div>
              )}
            </li>
          );
        })}
      </ul>
      {hasMore ? (
        <button type="button" className="button button--secondary" data-testid="conversation-more" disabled={loading} onClick={() => void loadMore()}>
          More
        </button>
      ) : null}
    </nav>
  );
}

/** "Delete? Yes / No" in place of the item's buttons: a delete cannot be undone. Escape or No keeps it. */
function ConfirmDelete({ onConfirm, onCancel }: { onConfirm: () => void; onCancel: () => void }) {
  const handleKeyDown = (event: KeyboardEvent<HTMLDivElement>) => {
    if (event.key === "Escape") onCancel();
  };
  return (
    <div className="sidebar__confirm" role="group" aria-label="Delete this conversation?" data-testid="conversation-forget-prompt" onKeyDown={handleKeyDown}>
      <span>Delete?</span>
      <button type="button" className="link-button link-button--danger" data-testid="conversation-forget-confirm" onClick={onConfirm}>
        Yes
      </button>
      <button type="button" className="link-button" data-testid="conversation-forget-cancel" autoFocus onClick={onCancel}>
        No
      </button>
    </div>
  );
}

function RenameForm({ initial, onSave, onCancel }: { initial: string; onSave: (title: string) => void; onCancel: () => void }) {
  const [draft, setDraft] = useState(initial);
  const blank = draft.trim().length === 0;
  const handleSubmit = (event: FormEvent<HTMLFormElement>) => {
    event.preventDefault();
    if (!blank) onSave(draft.trim());
  };
  const handleKeyDown = (event: KeyboardEvent<HTMLInputElement>) => {
    if (event.key === "Escape") onCancel();
  };
  return (
    <form className="sidebar__rename" onSubmit={handleSubmit}>
      <input
        className="sidebar__input"
        data-testid="conversation-title-input"
        aria-label="Title"
        maxLength={200}
        autoFocus
        value={draft}
        onChange={(event) => setDraft(event.target.value)}
        onKeyDown={handleKeyDown}
      />
      <button type="submit" className="button button--primary" data-testid="conversation-rename-save" disabled={blank}>
        Save
      </button>
    </form>
  );
}
