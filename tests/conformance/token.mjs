// Loaded with `node --import` before the conformance suite: every HTTP request the suite
// makes (through fetch, undici or node:http) carries the daemon's bearer token, which the
// suite has no option for. `VFS_CONFORMANCE_AUTH` is the header's value; the suite's own
// headers win where it sets `Authorization` itself.
import { createRequire, syncBuiltinESMExports } from 'node:module';

const auth = process.env.VFS_CONFORMANCE_AUTH;
const withAuth = (headers) => {
  const merged = new Headers(headers ?? {});
  if (!merged.has('authorization')) merged.set('authorization', auth);
  return merged;
};

const fetchWithout = globalThis.fetch;
globalThis.fetch = (input, init = {}) =>
  fetchWithout(input, { ...init, headers: withAuth(init.headers ?? (input instanceof Request ? input.headers : undefined)) });

const require = createRequire(`${process.env.VFS_CONFORMANCE_PACKAGE}/package.json`);
const undici = require('undici');
const undiciRequest = undici.request;
undici.request = (url, options = {}) =>
  undiciRequest(url, { ...options, headers: { authorization: auth, ...(options.headers ?? {}) } });

const http = require('node:http');
const httpRequest = http.request;
http.request = (options, ...rest) => {
  if (options && typeof options === 'object' && !(options instanceof URL)) {
    const headers = { ...(options.headers ?? {}) };
    if (!Object.keys(headers).some((name) => name.toLowerCase() === 'authorization')) headers.authorization = auth;
    return httpRequest({ ...options, headers }, ...rest);
  }
  return httpRequest(options, ...rest);
};
syncBuiltinESMExports();
