// snapshot.js -- the served memory snapshot's file format and checks (protocol.js SNAPSHOTS),
// shared by the kernel core (browser and Node), the setup step that makes the image
// (scripts/make_snapshot.mjs) and the Node hosts.  Plain JavaScript: no node: module, no DOM.
//
// A served image is one file beside the runtime (build/www/pyodide/FILE, with FILE.br and FILE.gz
// for browsers), named by its build, and listed in the served lock (pyodide-lock.json) as
//   "cerea_snapshot": {"file_name": FILE, "sha256": hex of FILE, "key": build key, "size": bytes,
//                      "wire": {"gzip": [...], "br": [...]}}
// (wire: for each encoding, the bytes sent up to the end of each MiB of the file, cumulative: the
// heap compresses unevenly, and a browser measuring its link from the decoded stream needs to
// know how much of the transfer a decoded MiB was)
// Its bytes: a 128-byte header, then Pyodide's own image (makeMemorySnapshot: its magic, its
// Pyodide BUILD_ID, the JS references as JSON, the wasm heap):
//   0..7     "CEREASNP"
//   8..11    format version (u32 little-endian, FORMAT)
//   12..75   the build key (64 hex characters: SHA-256 over the runtime's files and the worker's
//            and kernel's sources; worker/snapshot-key.js computes it, ui-adapter/build.mjs compiles
//            it into the browser worker)
//   76..127  zero
// So the file names its build itself: an image copied from another build, or served beside the
// wrong runtime, is refused by the key before Pyodide sees it, whatever the lock says.
//
//   checkServed(entry, bytes, key, sha256Hex) → Promise<{bytes} | {refused: why}>
//       entry: the lock's cerea_snapshot; bytes: the file as read; key: this build's key;
//       sha256Hex(bytes) → Promise<hex>.  {bytes} is Pyodide's image (a view into the file).
//   wrapImage(key, image) → Uint8Array   the file's bytes (setup)
export const FORMAT = 1;
export const HEADER_BYTES = 128;
const MAGIC = 'CEREASNP';
export const LOCK_FIELD = 'cerea_snapshot';
export const fileName = (key) => `cerea-snapshot-${key.slice(0, 16)}.bin`;

const ascii = (b, from, to) => String.fromCharCode(...b.subarray(from, to));

export function wrapImage(key, image) {
  if (!/^[0-9a-f]{64}$/.test(key)) throw new Error(`a build key is 64 hex characters, not ${JSON.stringify(key)}`);
  const out = new Uint8Array(HEADER_BYTES + image.length);
  for (let i = 0; i < MAGIC.length; i++) out[i] = MAGIC.charCodeAt(i);
  new DataView(out.buffer).setUint32(8, FORMAT, true);
  for (let i = 0; i < 64; i++) out[12 + i] = key.charCodeAt(i);
  out.set(image, HEADER_BYTES);
  return out;
}

// The key the file says it was made by, or why it names none.
export function imageKey(bytes) {
  if (!(bytes instanceof Uint8Array) || bytes.length <= HEADER_BYTES) return { refused: 'it is too short to be an image' };
  if (ascii(bytes, 0, 8) !== MAGIC) return { refused: 'it is not an image of ours' };
  const v = new DataView(bytes.buffer, bytes.byteOffset, HEADER_BYTES).getUint32(8, true);
  if (v !== FORMAT) return { refused: `its format is ${v}, not ${FORMAT}` };
  return { key: ascii(bytes, 12, 76) };
}

export async function checkServed(entry, bytes, key, sha256Hex) {
  if (!key) return { refused: 'this host knows no build key' };
  if (!entry || typeof entry.sha256 !== 'string') return { refused: 'the served lock lists none' };
  if (!(bytes instanceof Uint8Array)) return { refused: 'no bytes' };
  if (entry.size !== undefined && entry.size !== bytes.length) return { refused: `its size is ${bytes.length}, the served lock says ${entry.size}` };
  let hex;
  try { hex = await sha256Hex(bytes); } catch (e) { return { refused: `hashing failed (${e.message})` }; }
  if (hex !== entry.sha256) return { refused: 'its bytes do not match the sha256 of the served lock' };
  const k = imageKey(bytes);
  if (k.refused) return k;
  if (k.key !== key) return { refused: 'made by another build' };
  return { bytes: bytes.subarray(HEADER_BYTES) };
}
