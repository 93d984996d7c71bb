import type { useAgent } from "@thinwire/react";

// View types derived from the hook's public return value, so the demo
// depends on nothing but `useAgent` itself.
export type AgentView = ReturnType<typeof useAgent>;
export type AgentTurn = AgentView["turns"][number];
export type AgentActivity = AgentView["activity"][number];
export type AgentStatus = AgentView["status"];
