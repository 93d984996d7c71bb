import type { AgentStatus } from "../agent-types";
import { StatusIndicator } from "./StatusIndicator";
import { UserSelect } from "./UserSelect";
import type { DemoUser } from "../users";

interface HeaderProps {
  user: DemoUser;
  status: AgentStatus;
  /** A question waits for the user's answer. */
  waiting: boolean;
  /** The conversation's title, when it has one. */
  title: string | null;
  onUserChange: (user: DemoUser) => void;
}

export function Header({ user, status, waiting, title, onUserChange }: HeaderProps) {
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
        <StatusIndicator status={status} waiting={waiting} />
      </div>
    </header>
  );
}
