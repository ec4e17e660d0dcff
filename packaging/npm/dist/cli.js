#!/usr/bin/env node
// The npm launcher of Browser Pilot. It runs the native executable packaged beside it
// (native/<target>/<name>) directly, without a shell, on the caller's own stdin, stdout and
// stderr (inherited file descriptors, so backpressure and EOF are the native process's own),
// forwards termination signals to it and exits the way it exited: with its exit code, or by
// re-raising its signal. It never downloads anything and never falls back to another runtime.
// Loaded as a module it exports `run(name)` for the sibling bin files (bp, the runner).
'use strict';

const { spawn } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

// Node's platform and arch to the Rust target the package was built for.
const TARGETS = {
  'linux x64': 'x86_64-unknown-linux-gnu',
  'linux arm64': 'aarch64-unknown-linux-gnu',
};

// Signals a host or a terminal sends to stop or hang up the process; the native process
// decides what they mean. (SIGUSR1 is Node's debugger signal and is not taken over.)
const FORWARDED_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGQUIT'];

function fail(name, message) {
  process.stderr.write(`${name}: ${message}\n`);
  process.exit(1);
}

function nativeExecutable(name) {
  const target = TARGETS[`${process.platform} ${process.arch}`];
  if (!target) {
    fail(name, `no native executable for ${process.platform} ${process.arch} in this package`);
  }
  const file = path.join(__dirname, '..', 'native', target, name);
  if (!fs.existsSync(file)) {
    fail(name, `the package is incomplete: ${file} is missing (reinstall browser-pilot-cli)`);
  }
  return file;
}

function run(name) {
  const file = nativeExecutable(name);
  const child = spawn(file, process.argv.slice(2), { stdio: 'inherit', shell: false });
  const forward = (signal) => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill(signal);
    }
  };
  for (const signal of FORWARDED_SIGNALS) {
    process.on(signal, forward);
  }
  child.on('error', (error) => fail(name, `cannot start ${file}: ${error.message}`));
  child.on('exit', (code, signal) => {
    for (const forwarded of FORWARDED_SIGNALS) {
      process.removeListener(forwarded, forward);
    }
    if (signal) {
      // Die by the same signal, so our parent sees what the native process saw.
      process.kill(process.pid, signal);
      // A signal whose default action is not to terminate: report it as a shell would.
      const number = os.constants.signals[signal] || 0;
      setTimeout(() => process.exit(128 + number), 100);
      return;
    }
    process.exit(code === null ? 1 : code);
  });
}

module.exports = { run };

if (require.main === module) {
  run('browser-pilot');
}
