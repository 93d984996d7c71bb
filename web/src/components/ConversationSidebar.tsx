import { useState, type FormEvent, type KeyboardEvent } from "react";
import { useConversations } from "@thinwire/react";

/**
 * The signed-in user's conversations with the demo agent, most recently active
 * first. It shares the page's AgentProvider: picking one shows it in the chat,
 * and the list refreshes whenever a reply finishes.
 */
export function ConversationSidebar() {
  const { conversations, loading, error, hasMore, loadMore, rename, remove, selected, select, create } = useConversations();
  const [renaming, setRenaming] = useState<string | null>(null);

  return (
    <nav className="sidebar" aria-label="Conversations" data-testid="conversations">
      <div className="sidebar__header">
        <h2 className="sidebar__heading">Conversations</h2>
        <button type="button" className="button button--secondary" data-testid="conversation-new" onClick={create}>
          New
        </button>
      </div>
      {error ? (
        <p className="sidebar__error" role="alert" data-testid="conversations-error">
          {error.code}: {error.message}
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
                  aria-label={`Forget “${item.title ?? "Untitled"}”`}
                  title="Forget: delete it from the server"
                  onClick={() => void remove(item.contextId).catch(() => undefined)}
                >
                  ×
                </button>
              </div>
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
