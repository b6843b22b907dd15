/**
 * What runs before a program, in its own interpreter: it reads the program and the tools
 * it may call from descriptor 4, makes each tool a function, and runs the program. A
 * tool's call is one JSON line written to descriptor 3 and one read back from 4; the
 * answer is the tool's text, an error the program may catch (`ToolError`, and `Refused`
 * with `rule` and `layer` for a refusal), or the end of the program (a bound it passed),
 * which it cannot catch. Both are passed to the interpreter as an argument (`-c`, `-e`):
 * no file is written for them.
 *
 * Exit statuses of the prelude's own: 70 when the harness closed the channel, 71 when it
 * ended the program.
 */

export const PYTHON_PRELUDE = String.raw`
import builtins as _builtins, json as _json, keyword as _keyword, os as _os, sys as _sys, threading as _threading, traceback as _traceback
_replies = _os.fdopen(4, 'rb')
# One call at a time on the channel, whatever threads the program starts.
_channel = _threading.Lock()

class ToolError(Exception):
    """A tool answered with an error; .tool names it."""
    def __init__(self, tool, message):
        Exception.__init__(self, message)
        self.tool = tool

class Refused(ToolError):
    """The act was refused: .rule and .layer name what refused it."""
    def __init__(self, tool, message, rule, layer):
        ToolError.__init__(self, tool, message)
        self.rule = rule
        self.layer = layer

def _send(data):
    while data:
        data = data[_os.write(3, data):]

def _reply():
    line = _replies.readline()
    if not line:
        _sys.stdout.flush()
        _sys.stderr.write('\nio-harness: the harness closed the program\'s channel\n')
        _sys.stderr.flush()
        _os._exit(70)
    return _json.loads(line)

def call_tool(name, args=None):
    """Calls the tool name with the arguments args (a dict); returns its text."""
    if not isinstance(name, str):
        raise TypeError('call_tool takes a tool name, a str')
    if args is None:
        args = {}
    if not isinstance(args, dict):
        raise TypeError('call_tool takes the arguments as a dict of them')
    # What cannot be sent (a NaN, an object JSON has no form for) raises here, in the program.
    data = (_json.dumps({'tool': name, 'args': args}, allow_nan=False) + '\n').encode('utf-8')
    with _channel:
        # What it printed before the call reaches the harness first, and counts against its cap.
        _sys.stdout.flush()
        _sys.stderr.flush()
        _send(data)
        reply = _reply()
    if 'stop' in reply:
        _sys.stdout.flush()
        _sys.stderr.write('\n' + reply['stop'] + '\n')
        _sys.stderr.flush()
        _os._exit(71)
    if 'refused' in reply:
        raise Refused(name, reply['content'], reply['refused']['rule'], reply['refused']['layer'])
    if reply.get('isError'):
        raise ToolError(name, reply['content'])
    return reply['content']

def _bind(name, params):
    def tool(*args, **kwargs):
        if len(args) > len(params):
            raise TypeError('%s takes at most %d positional arguments (%s)' % (name, len(params), ', '.join(params)))
        named = dict(zip(params, args))
        for key, value in kwargs.items():
            if key in named:
                raise TypeError('%s got %s twice' % (name, key))
            named[key] = value
        return call_tool(name, named)
    tool.__name__ = name
    return tool

_setup = _reply()
_program = {'__name__': '__main__', '__builtins__': __builtins__, 'ToolError': ToolError, 'Refused': Refused, 'call_tool': call_tool}
for _name, _params in _setup['tools'].items():
    # A name that would hide Python's own (a keyword, a builtin, a dunder, the prelude's) is reached through call_tool.
    if _name.isidentifier() and not _keyword.iskeyword(_name) and not hasattr(_builtins, _name) and not _name.startswith('__') and _name not in _program:
        _program[_name] = _bind(_name, _params)
try:
    _code = compile(_setup['source'], '<program>', 'exec')
    del _setup
    exec(_code, _program)
except SystemExit:
    raise
except BaseException as _error:
    _sys.stdout.flush()
    _tb = _error.__traceback__
    while _tb is not None and _tb.tb_frame.f_code.co_filename != '<program>':
        _tb = _tb.tb_next
    _traceback.print_exception(type(_error), _error, _tb)
    _sys.exit(1)
`;

export const NODE_PRELUDE = String.raw`
'use strict';
const fs = require('node:fs');
const vm = require('node:vm');
let pending = Buffer.alloc(0);
const chunk = Buffer.alloc(65536);
const nap = new Int32Array(new SharedArrayBuffer(4));
function readLine() {
  for (;;) {
    const at = pending.indexOf(10);
    if (at >= 0) {
      const line = pending.subarray(0, at).toString('utf8');
      pending = pending.subarray(at + 1);
      return line;
    }
    let read;
    try {
      read = fs.readSync(4, chunk, 0, chunk.length, null);
    } catch (error) {
      if (error.code === 'EAGAIN') { Atomics.wait(nap, 0, 0, 2); continue; }
      throw error;
    }
    if (read === 0) {
      process.stderr.write("\nio-harness: the harness closed the program's channel\n");
      process.exit(70);
    }
    pending = Buffer.concat([pending, chunk.subarray(0, read)]);
  }
}
function send(message) {
  let data = Buffer.from(JSON.stringify(message) + '\n');
  while (data.length > 0) {
    try {
      data = data.subarray(fs.writeSync(3, data));
    } catch (error) {
      if (error.code === 'EAGAIN') { Atomics.wait(nap, 0, 0, 2); continue; }
      throw error;
    }
  }
}
class ToolError extends Error {
  constructor(tool, message) { super(message); this.name = 'ToolError'; this.tool = tool; }
}
class Refused extends ToolError {
  constructor(tool, message, rule, layer) { super(tool, message); this.name = 'Refused'; this.rule = rule; this.layer = layer; }
}
function call_tool(name, args) {
  if (typeof name !== 'string') throw new TypeError('call_tool takes a tool name, a string');
  if (args !== undefined && (args === null || typeof args !== 'object' || Array.isArray(args)))
    throw new TypeError('call_tool takes the arguments as one object of them');
  send({ tool: name, args: args === undefined ? {} : args });
  const reply = JSON.parse(readLine());
  if ('stop' in reply) {
    process.stderr.write('\n' + reply.stop + '\n');
    process.exit(71);
  }
  if ('refused' in reply) throw new Refused(name, reply.content, reply.refused.rule, reply.refused.layer);
  if (reply.isError) throw new ToolError(name, reply.content);
  return reply.content;
}
const named = (value, params) =>
  value !== null && typeof value === 'object' && !Array.isArray(value) &&
  Object.keys(value).every((key) => params.includes(key));
function bind(name, params) {
  return (...args) => {
    if (args.length === 1 && named(args[0], params)) return call_tool(name, args[0]);
    if (args.length > params.length)
      throw new TypeError(name + ' takes at most ' + params.length + ' arguments (' + params.join(', ') + '), or one object of them');
    const given = {};
    args.forEach((value, index) => { if (value !== undefined) given[params[index]] = value; });
    return call_tool(name, given);
  };
}
const described = (error) => {
  try {
    return (error && error.stack) || String(error);
  } catch {
    return Object.prototype.toString.call(error);
  }
};
const setup = JSON.parse(readLine());
const globals = { require, ToolError, Refused, call_tool };
// A name that is not an identifier, is reserved, or would hide one of JavaScript's own is reached through call_tool.
const reserved = new Set('arguments await break case catch class const continue debugger default delete do else enum eval export extends false finally for function if implements import in instanceof interface let new null package private protected public return static super switch this throw true try typeof var void while with yield undefined NaN Infinity'.split(' '));
for (const name of Object.keys(setup.tools))
  if (/^[A-Za-z_$][\w$]*$/.test(name) && !reserved.has(name) && !(name in globalThis) && !(name in globals))
    globals[name] = bind(name, setup.tools[name]);
let run;
try {
  run = vm.compileFunction('return (async () => {\n' + setup.source + '\n})();', Object.keys(globals), { filename: '<program>' });
} catch (error) {
  process.stderr.write(described(error));
  process.exit(1);
}
Promise.resolve()
  .then(() => run(...Object.values(globals)))
  .then(
    () => undefined,
    (error) => {
      process.stderr.write(described(error) + '\n');
      process.exitCode = 1;
    },
  );
`;
