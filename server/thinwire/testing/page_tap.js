// Installed in every document before its own scripts: hands every byte the page's own
// code can read from the network to the recorder, as it arrives, under an id per request
// (per socket): a `fetch` response's body (streams included), an `XMLHttpRequest`'s
// response as it grows, each event an `EventSource` dispatches (written back as SSE, so
// its deltas are joined like a stream's), each message a `WebSocket` receives. DevTools
// may drop a body it did not buffer (a stream the page closed); what the page read is
// never lost. Each call is counted (`__thinwireTapsSent`), so the recorder can wait
// until it has heard every one; a request's last call says it ended.
(() => {
  const binding = window.__thinwireTap;
  if (typeof binding !== "function") return; // nothing to hand to: the network's copy only
  const load = `${Date.now().toString(36)}-${Math.random().toString(36).slice(2)}`;
  let sent = 0;
  let opened = 0;
  Object.defineProperty(window, "__thinwireTapsSent", { value: () => ({ load, sent }) });
  const newId = () => `${load}-${(opened += 1)}`;
  // `text` may be a promise (a Blob's): counted now, handed over when it resolves.
  const tap = (id, api, method, url, text, ended = false) => {
    sent += 1;
    Promise.resolve(text)
      .then(
        (read) => read,
        (error) => `<unreadable: ${error}>`,
      )
      .then((read) => binding(load, id, api, method, url, read, ended))
      .catch(() => {});
  };
  const asText = (value) => {
    if (value == null) return "";
    if (typeof value === "string") return value;
    if (value instanceof ArrayBuffer || ArrayBuffer.isView(value)) {
      return new TextDecoder().decode(value);
    }
    if (value instanceof Blob) return value.text();
    if (value instanceof Document) return value.documentElement?.outerHTML ?? "";
    try {
      return JSON.stringify(value) ?? String(value);
    } catch (error) {
      return String(value);
    }
  };

  const fetch = window.fetch.bind(window);
  window.fetch = async (...args) => {
    const response = await fetch(...args);
    // A null-body status (204, 304…) has nothing to record, and a Response rebuilt
    // around a stream for one is refused.
    if (!response.body || [101, 204, 205, 304].includes(response.status)) return response;
    const id = newId();
    const { url } = response;
    const method = String(
      args[1]?.method ?? (args[0] instanceof Request ? args[0].method : "GET"),
    ).toUpperCase();
    tap(id, "fetch", method, url, "");
    const [mine, theirs] = response.body.tee();
    (async () => {
      const reader = theirs.getReader();
      const decoder = new TextDecoder();
      try {
        for (;;) {
          const { done, value } = await reader.read();
          if (done) break;
          tap(id, "fetch", method, url, decoder.decode(value, { stream: true }));
        }
      } finally {
        tap(id, "fetch", method, url, decoder.decode(), true);
      }
    })().catch(() => {});
    const copy = new Response(mine, response);
    Object.defineProperty(copy, "url", { value: url });
    return copy;
  };

  const NativeXMLHttpRequest = window.XMLHttpRequest;
  window.XMLHttpRequest = class XMLHttpRequest extends NativeXMLHttpRequest {
    #method = "GET";
    #id = null;
    #read = 0;
    #ended = false;

    constructor() {
      super();
      // Before any listener of the page's: what it reads, the tap has read first.
      for (const type of ["readystatechange", "progress", "load", "loadend"]) {
        super.addEventListener(type, () => this.#take());
      }
    }

    open(method, ...rest) {
      this.#method = String(method).toUpperCase();
      this.#id = null;
      this.#read = 0;
      this.#ended = false;
      return super.open(method, ...rest);
    }

    abort() {
      this.#take(); // an abort empties responseText: keep what the page could read
      return super.abort();
    }

    #take() {
      if (this.readyState < NativeXMLHttpRequest.HEADERS_RECEIVED || this.#ended) return;
      const url = this.responseURL;
      if (this.#id === null) {
        this.#id = newId();
        tap(this.#id, "XMLHttpRequest", this.#method, url, "");
      }
      const done = this.readyState === NativeXMLHttpRequest.DONE;
      if (this.responseType === "" || this.responseType === "text") {
        const text = this.responseText;
        if (text.length > this.#read) {
          tap(this.#id, "XMLHttpRequest", this.#method, url, text.slice(this.#read));
          this.#read = text.length;
        }
      } else if (done) {
        tap(this.#id, "XMLHttpRequest", this.#method, url, asText(this.response));
      }
      if (done) {
        this.#ended = true;
        tap(this.#id, "XMLHttpRequest", this.#method, url, "", true);
      }
    }
  };

  const NativeEventSource = window.EventSource;
  if (NativeEventSource) {
    // An event as a stream would carry it, so its frames' deltas are joined.
    const asEvent = (event) => {
      const lines = event.type === "message" ? [] : [`event: ${event.type}`];
      if (event.lastEventId) lines.push(`id: ${event.lastEventId}`);
      for (const line of asText(event.data).split("\n")) lines.push(`data: ${line}`);
      return `${lines.join("\n")}\n\n`;
    };
    window.EventSource = class EventSource extends NativeEventSource {
      #id = newId();
      #heard = new Set();
      #ended = false;

      constructor(...args) {
        super(...args);
        tap(this.#id, "EventSource", "GET", this.url, "");
        this.#hear("message");
        super.addEventListener("error", () => {
          if (this.readyState === NativeEventSource.CLOSED) this.#end();
        });
      }

      // An event of another name reaches the page's code only through a listener of
      // that name: the tap listens for it too, first.
      addEventListener(type, ...rest) {
        this.#hear(String(type));
        return super.addEventListener(type, ...rest);
      }

      close() {
        super.close();
        this.#end();
      }

      #hear(type) {
        if (this.#heard.has(type)) return;
        this.#heard.add(type);
        super.addEventListener(type, (event) => {
          if (event instanceof MessageEvent) {
            tap(this.#id, "EventSource", "GET", this.url, asEvent(event));
          }
        });
      }

      #end() {
        if (this.#ended) return;
        this.#ended = true;
        tap(this.#id, "EventSource", "GET", this.url, "", true);
      }
    };
  }

  const NativeWebSocket = window.WebSocket;
  if (NativeWebSocket) {
    window.WebSocket = class WebSocket extends NativeWebSocket {
      constructor(...args) {
        super(...args);
        const id = newId();
        tap(id, "WebSocket", "", this.url, "");
        super.addEventListener("message", (event) => {
          tap(id, "WebSocket", "", this.url, asText(event.data));
        });
        super.addEventListener("close", () => tap(id, "WebSocket", "", this.url, "", true));
      }
    };
  }
})();
