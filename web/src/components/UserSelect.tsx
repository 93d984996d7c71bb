import { useId } from "react";
import { DEMO_USERS, isDemoUser, type DemoUser } from "../users";

interface UserSelectProps {
  value: DemoUser;
  onChange: (user: DemoUser) => void;
}

export function UserSelect({ value, onChange }: UserSelectProps) {
  const id = useId();
  return (
    <div className="field">
      <label htmlFor={id} className="field__label">
        User
      </label>
      <select
        id={id}
        className="field__select"
        data-testid="user-select"
        value={value}
        onChange={(event) => {
          const next = event.target.value;
          if (isDemoUser(next)) onChange(next);
        }}
      >
        {DEMO_USERS.map((name) => (
          <option key={name} value={name}>
            {name}
          </option>
        ))}
      </select>
    </div>
  );
}
