// keep.mjs -- what keeping a streaming answer's text in the store costs the orchestrator: CHATS
// chats at once each stream ANSWERS answers of KIB KiB in PIECES pieces DELAY ms apart (the model
// TEST DOUBLE of tests/integration/model_double.mjs: no model runs), and the server's CPU time
// (utime + stime from /proc) over the whole is printed with the streaming time, so two binaries
// (one that writes the text only at the end, one that also keeps it every ORCH_KEEP_MS) can be
// compared, alternated.
//
//   [CEREA_BIN=build/cerea-sandbox] node bench/assistant/keep.mjs [--chats 8] [--answers 3]
//                                 [--kib 256] [--pieces 200] [--delay 25]
// Prints one JSON line: {bin, cpu_s, wall_s, answers, kib}.
import { readFileSync } from 'node:fs';
import { startServer, call, newChat, Page, BIN } from '../../tests/integration/lib.mjs';
import { startModelDouble } from '../../tests/integration/model_double.mjs';

const args = Object.fromEntries(process.argv.slice(2).reduce((a, v, i, all) => (v.startsWith('--') ? a.concat([[v.slice(2), all[i + 1]]]) : a), []));
const CHATS = Number(args.chats || 8), ANSWERS = Number(args.answers || 3), KIB = Number(args.kib || 256);
const PIECES = Number(args.pieces || 200), DELAY = Number(args.delay || 25);

const cpu = (pid) => { // seconds of CPU the process used so far
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(f[11]) + Number(f[12])) / 100;
};
const model = await startModelDouble();
const srv = await startServer({ env: { CEREA_LLM_URL: model.url, CEREA_LLM_MODEL: 'double', CEREA_LLM_STALL_S: '30', CEREA_LLM_TURN_S: '600' } });
try {
  const text = 'x'.repeat(KIB * 1024 - 1) + '.';
  const chats = [];
  for (let i = 0; i < CHATS; i++) {
    const chat = await newChat(srv);
    const page = new Page(srv, chat, `p${i}`);
    await page.opened;
    chats.push({ chat, page });
  }
  const c0 = cpu(srv.pid), t0 = Date.now();
  await Promise.all(chats.map(async ({ chat, page }) => {
    for (let a = 0; a < ANSWERS; a++) {
      model.script.push({ text, pieces: PIECES, delayMs: DELAY });
      const r = await call(srv, 'POST', `/v1/chats/${chat.id}/messages`, { token: chat.token, body: { text: `q${a}` } });
      if (r.status !== 201) throw new Error(`ask: ${r.status} ${r.buf}`);
      await page.next((e) => e.event === 'message' && e.id !== null && e.data.message_id === r.json.answer_id && e.data.state !== 'streaming', 120000);
      page.events.length = 0;
    }
  }));
  const c1 = cpu(srv.pid), t1 = Date.now();
  console.log(JSON.stringify({ bin: BIN, cpu_s: +(c1 - c0).toFixed(2), wall_s: +((t1 - t0) / 1000).toFixed(2), answers: CHATS * ANSWERS, kib: KIB }));
  chats.forEach(({ page }) => page.close());
} finally {
  await srv.stop();
  await model.close();
}
