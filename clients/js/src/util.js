// Small pure helpers shared by the client's modules: ids, bodies as text, numbers read
// off frames, and the clock. isValidId and bodyText are exported by the package too.

export function isValidId(s) {
  return typeof s === 'string' && /^[A-Za-z0-9_.:-]{1,64}$/.test(s);
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** A body as text: bodies come back with the type the sender used (str or bin). */
export function bodyText(body) {
  if (typeof body === 'string') return { text: body, binary: false };
  if (body instanceof Uint8Array) {
    try {
      return { text: utf8.decode(body), binary: false };
    } catch {
      return { text: `[${body.length} bytes of binary data]`, binary: true };
    }
  }
  return { text: '', binary: true };
}

export const asInt = (v) => (typeof v === 'number' && Number.isFinite(v) ? v : typeof v === 'bigint' ? Number(v) : 0);
export const now = () => (typeof performance !== 'undefined' ? performance.now() : Date.now());
