/** The `baseUrl` option of an AgentClient and of a ConversationList, checked where each is made. */

const SCHEME = /^[a-zA-Z][a-zA-Z0-9+.-]*:/;
const ABSOLUTE = /^https?:\/\//i;

/**
 * `baseUrl` as given, if it can only name where the thinwire routes are: an
 * `http://` or `https://` URL, or a path from the page's origin (`"/ai"`), with no
 * credentials, query or fragment. Anything else would never reach the server —
 * a browser's `fetch` refuses a URL with credentials, a query is cut off by the
 * routes appended to it — or would leave the page's origin while it reads like
 * a path (`"//host"`, `"/\\host"`), or would reach another server from a page
 * than from Node.js (`"http:/host"`): a mistake of the caller's, thrown as a
 * TypeError rather than retried as a network fault.
 */
export function baseUrlOption(baseUrl: string | undefined): string | undefined {
  if (baseUrl === undefined || baseUrl === "") return baseUrl;
  const wrong = (why: string): TypeError =>
    new TypeError(
      `baseUrl must be an http(s) URL or a path from the page's origin ("/ai"), ${why}, not ${JSON.stringify(baseUrl)}.`,
    );
  if (typeof baseUrl !== "string") throw wrong("a string");
  if (/[?#\\\s]/.test(baseUrl)) throw wrong("without a query, a fragment, backslashes or spaces");
  if (!SCHEME.test(baseUrl)) {
    if (!baseUrl.startsWith("/") || baseUrl.startsWith("//")) throw wrong("a path starting with one /");
    return baseUrl;
  }
  let url: URL;
  try {
    url = new URL(baseUrl);
  } catch {
    throw wrong("that parses");
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") throw wrong("of http: or https:");
  // `new URL` reads "http:/host" (and "http:host") as "http://host", as Node's fetch does,
  // but a page of that scheme resolves it against itself: a path on the page's origin.
  if (!ABSOLUTE.test(baseUrl)) throw wrong("with its two slashes (http://, https://)");
  if (url.username !== "" || url.password !== "") throw wrong("without credentials (send them in headers)");
  return baseUrl;
}
