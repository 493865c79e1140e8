#!/usr/bin/env python3
"""Run a command and check how it ended and what it printed on stderr.

Used by the simulated-GPU tests whose program must stop: a fault must be an
abort() with the exact `simgpu: illegal address ...` line, a bad setting an
exit code with the exact one-line error.  A program that fails some other
way (another crash, another message) does not pass.

  expect_stderr.py (--abort | --exit N) (--line TEXT | --expected-line)
                   [--propagate] -- command...

--expected-line takes the line to look for from the program's own stderr
("expect-line: <line>", printed before it faults, since only it knows the
address).  --propagate is for meson's should_fail: when every check holds,
exit with the program's failure status (128 + signal); when one does not,
exit 0 so the should_fail test reports it.
"""
import argparse
import signal
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser()
    how = ap.add_mutually_exclusive_group(required=True)
    how.add_argument('--abort', action='store_true')
    how.add_argument('--exit', type=int)
    what = ap.add_mutually_exclusive_group(required=True)
    what.add_argument('--line')
    what.add_argument('--expected-line', action='store_true')
    ap.add_argument('--propagate', action='store_true')
    ap.add_argument('cmd', nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd and a.cmd[0] == '--' else a.cmd

    p = subprocess.run(cmd, stderr=subprocess.PIPE, text=True)
    sys.stderr.write(p.stderr)
    lines = p.stderr.splitlines()
    problems = []

    if a.abort:
        if p.returncode != -signal.SIGABRT:
            problems.append('expected the program to abort (SIGABRT), '
                            'got return code %d' % p.returncode)
    elif p.returncode != a.exit:
        problems.append('expected exit code %d, got %d'
                        % (a.exit, p.returncode))

    want = a.line
    if a.expected_line:
        tagged = [l[len('expect-line: '):] for l in lines
                  if l.startswith('expect-line: ')]
        want = tagged[-1] if tagged else None
        if want is None:
            problems.append('the program printed no "expect-line:"')
    if want is not None and want not in lines:
        problems.append('expected the stderr line %r, got %r'
                        % (want, [l for l in lines
                                  if not l.startswith('expect-line: ')]))

    for msg in problems:
        print('FAIL: ' + msg, file=sys.stderr)
    if a.propagate:
        if problems:
            return 0
        return 128 + (-p.returncode if p.returncode < 0 else 1)
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
