// Server-sent events over fetch(). EventSource cannot send an Authorization header,
// and putting the API key in a query string would leak it into logs, so the page
// reads the stream itself.

/** Split a text/event-stream into events; feed it chunks, get {event, data} back. */
export class SseParser {
  constructor() {
    this.buffer = "";
  }

  /** @param {string} chunk decoded text; @returns {{event: string, data: string}[]} */
  push(chunk) {
    // Normalise line endings first: the spec allows CRLF, CR and LF.
    this.buffer += chunk.replace(/\r\n?/g, "\n");
    const out = [];
    let end;
    while ((end = this.buffer.indexOf("\n\n")) !== -1) {
      const block = this.buffer.slice(0, end);
      this.buffer = this.buffer.slice(end + 2);
      let event = "message";
      const data = [];
      for (const line of block.split("\n")) {
        if (line === "" || line.startsWith(":")) continue; // comment: keep-alive
        const colon = line.indexOf(":");
        const field = colon === -1 ? line : line.slice(0, colon);
        let value = colon === -1 ? "" : line.slice(colon + 1);
        if (value.startsWith(" ")) value = value.slice(1);
        if (field === "event") event = value;
        else if (field === "data") data.push(value);
      }
      if (data.length) out.push({ event, data: data.join("\n") });
    }
    return out;
  }
}

/**
 * Read the events of a streaming fetch Response, calling onEvent(name, parsedJson)
 * for each; resolves when the server closes the stream.
 */
export async function readEvents(response, onEvent) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  const parser = new SseParser();
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    for (const { event, data } of parser.push(decoder.decode(value, { stream: true }))) {
      let parsed;
      try {
        parsed = JSON.parse(data);
      } catch {
        continue; // a malformed event must not take the whole turn down with it
      }
      onEvent(event, parsed);
    }
  }
}
