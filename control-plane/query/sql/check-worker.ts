/**
 * The SQL check in a worker thread: large statements are parsed, checked and rewritten here so
 * the control plane's event loop keeps serving other requests meanwhile (see offload.ts).
 */
import { parentPort } from 'node:worker_threads';
import { checkAndRewrite, initSqlParser, SqlPolicyError } from './index.js';
import { checkMysql } from '../../live/mysql/check.js';
import type { CheckRequest, CheckReply } from './offload.js';
import { ApiError } from '../../errors.js';

await initSqlParser();
const port = parentPort;
if (!port) throw new Error('check-worker: run as a worker thread');
port.on('message', (req: CheckRequest) => {
  let reply: CheckReply;
  try {
    reply = { id: req.id, ok: req.kind === 'mysql' ? checkMysql(req.sql, req.policy) : checkAndRewrite(req.sql, req.policy) };
  } catch (err) {
    if (err instanceof ApiError) {
      reply = { id: req.id, api: { code: err.code, message: err.message, ...(err.details ? { details: err.details } : {}) } };
    } else if (err instanceof SqlPolicyError) {
      reply = { id: req.id, refused: { code: err.code, message: err.message, detail: err.detail, ...(err.position !== undefined ? { position: err.position } : {}) } };
    } else {
      reply = { id: req.id, failed: err instanceof RangeError ? 'too_complex' : 'error' };
    }
  }
  port.postMessage(reply);
});
port.postMessage({ ready: true });
