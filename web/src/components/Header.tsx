import type { AgentStatus } from "../agent-types";
import { StatusIndicator } from "./StatusIndicator";
import { UserSelect } from "./UserSelect";
import type { DemoUser } from "../users";

interface HeaderProps {
  user: DemoUser;
  status: AgentStatus;
  onUserChange: (user: DemoUser) => void;
  onNewConversation: () => void;
}

export function Header({ user, status, onUserChange, onNewConversation }: HeaderProps) {
  return (
    <header className="header">
      <h1 className="header__title">thinwire demo</h1>
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
