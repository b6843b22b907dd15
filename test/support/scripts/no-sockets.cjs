// Preloaded (node --require) into a process and each of its worker threads: every socket
// that tries to connect is written to the file IO_HARNESS_SOCKET_LOG names, and refused.
const { appendFileSync } = require('node:fs');
const net = require('node:net');
const { isMainThread } = require('node:worker_threads');

const connect = net.Socket.prototype.connect;
net.Socket.prototype.connect = function guarded(...args) {
  appendFileSync(process.env.IO_HARNESS_SOCKET_LOG, `${isMainThread ? 'main' : 'worker'} ${JSON.stringify(args[0])}\n`);
  this.destroy(new Error('a socket was opened where none may be'));
  return this;
};
void connect;
