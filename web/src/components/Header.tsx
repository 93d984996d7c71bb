import type { AgentStatus } from "../agent-types";
import { StatusIndicator } from "./StatusIndicator";
import { UserSelect } from "./UserSelect";
import type { DemoUser } from "../users";

interface HeaderProps {
  user: DemoUser;
  status: AgentStatus;
  /** The conversation's title, when it has one. */
  title: string | null;
  onUserChange: (user: DemoUser) => void;
  onNewConversation: () => void;
}

export function Header({ user, status, title, onUserChange, onNewConversation }: HeaderProps) {
  return (
    <header className="header">
      <div>
        <h1 className="header__title">thinwire demo</h1>
        {title ? (
          <p className="header__conversation" data-testid="conversation-heading">
            {title}
          </p>
        ) : null}
      </div>
      <div className="header__controls">
        <UserSelect value={user} onChange={onUserChange} />
        <button
          type="button"
          className="button button--secondary"
          data-testid="new-conversation"
          onClick={() => onNewConversation()}
        >
          New conversation
        </button>
        <StatusIndicator status={status} />
      </div>
    </header>
  );
}
