import { useEffect, useState } from "react";
import { Chat } from "./Chat";
import { signIn } from "./session";
import { initialUser, reflectUserInUrl, type DemoUser } from "./users";

export function App() {
  const [user, setUser] = useState<DemoUser>(() => initialUser());
  // The user the server's cookie names; the chat only mounts once it matches `user`.
  const [signedIn, setSignedIn] = useState<DemoUser | null>(null);
  const [problem, setProblem] = useState<string | null>(null);

  useEffect(() => {
    let current = true;
    reflectUserInUrl(user);
    setProblem(null);
    signIn(user).then(
      () => current && setSignedIn(user),
      (error: unknown) => current && setProblem(String(error)),
    );
    return () => {
      current = false;
    };
  }, [user]);

  if (signedIn !== user) {
    return (
      <div className="app">
        <p className="status" role={problem ? "alert" : "status"} data-testid="signing-in">
          {problem ?? `Signing in as ${user}…`}
        </p>
      </div>
    );
  }
  return <Chat key={user} user={user} onUserChange={setUser} />;
}
