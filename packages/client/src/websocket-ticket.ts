/**
 * WebSocket tickets: a browser cannot put headers on a WebSocket, so an app
 * that authenticates with a header (a bearer token) trades its headers for a
 * ticket — `POST {baseUrl}/agents/{agent}/tickets`, answered with
 * `{ ticket, expiresIn }` — and opens `…/ws?ticket=…`. A ticket opens one
 * socket, within `expiresIn` seconds: a fresh one is fetched for every connect.
 */
import { ThinwireError, toThinwireError } from "./errors.js";
import { PROTOCOL_HEADER, type Ticket } from "./generated/wire.js";
import { checkProtocol, type CredentialsMode, errorFromResponse, requestSignal } from "./http.js";
import { agentUrl, type TransportTarget } from "./transport.js";

/** Whether the request carries headers of the app's own (beyond the protocol header): then only a ticket authenticates a socket. */
export function needsTicket(headers: Record<string, string>): boolean {
  const protocol = PROTOCOL_HEADER.toLowerCase();
  return Object.keys(headers).some((name) => name.toLowerCase() !== protocol);
}

/**
 * Fetches a ticket with the request's headers and `credentials`. Throws the
 * server's typed error (`unauthenticated`, …), `network_error`, or `aborted`.
 */
export async function fetchTicket(
  fetchImpl: typeof fetch,
  credentials: CredentialsMode,
  { headers, ...target }: TransportTarget,
  signal?: AbortSignal,
): Promise<string> {
  const request = requestSignal(signal);
  let body: unknown;
  try {
    const url = agentUrl(target, "/tickets");
    const response = await fetchImpl(url, {
      method: "POST",
      headers: { accept: "application/json", ...headers },
      credentials,
      signal: request.signal,
    });
    if (!response.ok) throw await errorFromResponse(response, { method: "POST", url });
    checkProtocol(response);
    body = await response.json();
  } catch (error) {
    if (error instanceof SyntaxError) {
      throw new ThinwireError("protocol_error", "The ticket is not JSON.", { cause: error });
    }
    throw toThinwireError(error, signal);
  } finally {
    request.release();
  }
  const ticket = (body as Partial<Ticket> | null)?.ticket;
  if (typeof ticket !== "string" || ticket === "") {
    throw new ThinwireError("protocol_error", "The server answered the ticket request without a ticket.");
  }
  return ticket;
}

/** The socket URL with `ticket` in its query. */
export function withTicket(url: string, ticket: string): string {
  return `${url}${url.includes("?") ? "&" : "?"}ticket=${encodeURIComponent(ticket)}`;
}
