// The official TypeScript SDK (`@modelcontextprotocol/sdk`, pinned in scripts/e2e) as an
// agent host drives the daemon: read then edit, a long grep with progress, a grep cancelled
// mid-way. Prints one JSON object of what it saw; tests/test_typescript.py judges it.
// Arguments: URL TOKEN; the SDK is imported from VFS_NODE_MODULES.
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const [url, token] = process.argv.slice(2);
const sdk = (path) => import(pathToFileURL(join(process.env.VFS_NODE_MODULES, '@modelcontextprotocol/sdk/dist/esm', path)).href);
const { Client } = await sdk('client/index.js');
const { StreamableHTTPClientTransport } = await sdk('client/streamableHttp.js');

const errors = [];
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
const client = new Client({ name: 'vfs-e2e', version: '0' });
client.onerror = (error) => errors.push(String(error?.message ?? error));
await client.connect(transport);
const seen = { protocol: transport.protocolVersion ?? null };

// Every progress notification the server sends, as it arrives and before the SDK sees it: the
// SDK drops a report for a call it has given up on, so only the wire can say what came late.
const wire = [];
const deliver = transport.onmessage;
transport.onmessage = (message, ...rest) => {
  if (message.method === 'notifications/progress') wire.push(message.params);
  deliver?.(message, ...rest);
};

const text = (result) => result.content[0].text;
const call = (name, args, options) => client.callTool({ name, arguments: args }, undefined, options);

seen.read = text(await call('read_text_file', { path: '/output/notes.txt' }));
const edited = await call('edit_file', { path: '/output/notes.txt', edits: [{ oldText: 'one', newText: 'two' }] });
seen.edit = { isError: edited.isError ?? false, text: text(edited).split('\n')[0] };

const grep = { pattern: process.env.VFS_PATTERN, path: '/src/big' };
const progress = [];
const found = await call('grep', grep, { onprogress: (report) => progress.push(report), timeout: 120000 });
seen.grep = text(found);
seen.progress = progress.map((report) => [report.progress, report.message]);

// Cancelled after its first report: nothing more arrives for it, so the SDK reports no
// progress for an unknown token.
const controller = new AbortController();
let cancelledToken = null;
let wireAtCancel = 0;
const cancelled = call('grep', grep, {
  signal: controller.signal,
  timeout: 120000,
  onprogress: () => {
    // The report being handled is the last one on the wire.
    cancelledToken = wire.at(-1).progressToken;
    wireAtCancel = wire.length;
    controller.abort('no longer needed');
  },
});
seen.cancelled = await cancelled.then(() => 'answered', (error) => (controller.signal.aborted ? 'aborted' : String(error)));
await new Promise((resolve) => setTimeout(resolve, 1500));
seen.progressOfTheCancelledCall = wire.filter((report) => report.progressToken === cancelledToken).length;
seen.progressAfterTheCancel = wire.slice(wireAtCancel).filter((report) => report.progressToken === cancelledToken).length;
seen.errors = errors;
await client.close();
process.stdout.write(`${JSON.stringify(seen)}\n`);
