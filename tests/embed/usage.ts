// usage.ts -- the documented API as a TypeScript user writes it, checked with tsc --noEmit against
// the package's declarations (tests/e2e/embed.test.mjs): a wrong name or a wrong argument type is
// a compile error.
import { KernelSupervisor, ChatSession, Api, ApiError, MessageList, NOTE } from '@cerea/ui-adapter';

const supervisor = new KernelSupervisor({ workerUrl: '/worker/kernel-worker.js', pypi: false, spare: true });
const session = new ChatSession({ chatId: '0123456789abcdef0123456789abcdef', token: 'page-token', supervisor });
session.attach();
supervisor.start();
session.on('run', (run: { run_id: string; stdout?: string }) => console.log(run.run_id, run.stdout));
const api: Api = new Api({ token: 'page-token' });
const list: MessageList = new MessageList();
const error: typeof ApiError = ApiError;
const restarted: string = NOTE.restarted([]);
export { api, list, error, restarted };
