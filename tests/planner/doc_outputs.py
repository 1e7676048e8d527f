#!/usr/bin/env python3
"""Checks (or, with --update, regenerates) the tandem-plan outputs that a document shows, by
running the commands it shows with the tandem-plan of this build, so that the document
cannot drift from the tool (docs/planner.md; ctest planner_doc_outputs runs the check).

Two kinds of fenced blocks are checked:

* A transcript: a block whose first line starts with "$ ". Each "$ " line is a shell
  command (continued by a trailing backslash, and by the lines of a here-document up to
  its end tag), run with bash in a scratch directory where `tests/` is the source tree's,
  with the tandem-plan under test first on PATH; stdout and stderr are compared, merged,
  with the lines that follow it. A line "..." stands for any number of lines; lines
  without "..." between them must be adjacent in the output; a last line "rc=N" is the
  exit status.
* An excerpt: a ```json block right after a line `<!-- excerpt of: COMMAND -->`: every key
  it shows must be in COMMAND's JSON output with the value shown (numbers to 1e-9
  relative), in the same place.

    doc_outputs.py --tandem-plan build/tools/plan/tandem-plan docs/planner.md
    doc_outputs.py --tandem-plan build/tools/plan/tandem-plan --update docs/planner.md

--update rewrites each checked block from the tool's output: a transcript without "..." is
replaced whole; in one with "...", each shown line is replaced by the output line that
starts like it (up to its first digit), so the selection of lines stays; an excerpt keeps
its keys and takes the tool's values. Exit status 0 when every block matches (or was
updated), 1 otherwise, each mismatch printed with the expected and actual lines.
"""

import argparse
import json
import math
import os
import re
import subprocess
import sys
import tempfile

HEREDOC = re.compile(r"<<-?\s*'?\"?([A-Za-z_]+)'?\"?")
EXCERPT = re.compile(r"^<!-- excerpt of: (.*) -->$")


def fenced_blocks(lines):
    """(first line index, last line index exclusive, info string) of each fenced block's
    body."""
    blocks, i = [], 0
    while i < len(lines):
        if lines[i].startswith("```"):
            info = lines[i][3:].strip()
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            blocks.append((i + 1, j, info))
            i = j + 1
        else:
            i += 1
    return blocks


def parse_transcript(body):
    """[(command text, [expected lines])] of a transcript block's lines."""
    items, i = [], 0
    while i < len(body):
        line = body[i]
        if not line.startswith("$ "):
            raise ValueError("transcript line %r is not under a command" % line)
        cmd = [line[2:]]
        i += 1
        while cmd[-1].endswith("\\") and i < len(body):
            cmd.append(body[i])
            i += 1
        tag = HEREDOC.search("\n".join(cmd))
        if tag:
            while i < len(body) and body[i] != tag.group(1):
                cmd.append(body[i])
                i += 1
            if i < len(body):
                cmd.append(body[i])
                i += 1
        expected = []
        while i < len(body) and not body[i].startswith("$ "):
            expected.append(body[i])
            i += 1
        items.append(("\n".join(cmd), expected))
    return items


class Runner:
    def __init__(self, tandem_plan, source_dir):
        self.bin_dir = os.path.dirname(os.path.abspath(tandem_plan))
        self.scratch = tempfile.TemporaryDirectory(prefix="tandem-doc-")
        # The transcripts name files of the tree: test models, measured profiles.
        for d in ("tests", "bench"):
            os.symlink(os.path.join(source_dir, d), os.path.join(self.scratch.name, d))

    def run(self, command):
        env = dict(os.environ, PATH=self.bin_dir + os.pathsep + os.environ.get("PATH", ""),
                   LC_ALL="C")
        p = subprocess.run(["bash", "-c", command], cwd=self.scratch.name, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        return p.stdout.splitlines(), p.returncode


def split_rc(expected):
    if expected and re.fullmatch(r"rc=\d+", expected[-1]):
        return expected[:-1], int(expected[-1][3:])
    return expected, None


def match(expected, actual):
    """Index in `actual` of each expected line (None for "..."), or None if they do not
    match: lines in order, adjacent unless "..." stands between them, the first at the start
    and the last at the end unless "..." stands before or after."""
    pos, gap, out = 0, False, []
    for k, line in enumerate(expected):
        if line == "...":
            gap = True
            out.append(None)
            continue
        if gap:
            found = next((j for j in range(pos, len(actual)) if actual[j].rstrip() == line.rstrip()),
                         None)
        else:
            found = pos if pos < len(actual) and actual[pos].rstrip() == line.rstrip() else None
        if found is None:
            return None
        out.append(found)
        pos, gap = found + 1, False
    if not gap and pos != len(actual):
        return None
    return out


def key_of(line):
    """The part of an output line that identifies it: up to its first digit."""
    m = re.search(r"\d", line)
    return line[:m.start()] if m and m.start() >= 4 else line


def regenerate(expected, actual):
    """New expected lines: the actual lines if there is no "...", else each shown line
    replaced by the next actual line with its key, with "..." where they are not adjacent.
    Returns (lines, problems)."""
    if "..." not in expected:
        return list(actual), []
    out, problems, pos, prev = [], [], 0, None
    for line in expected:
        if line == "...":
            if out and out[-1] != "...":
                out.append("...")
            continue
        key = key_of(line)
        found = next((j for j in range(pos, len(actual)) if actual[j].startswith(key)), None)
        if found is None:
            problems.append("no output line starts like %r" % line)
            out.append(line)
            continue
        if prev is not None and found != prev + 1 and out[-1] != "...":
            out.append("...")
        if prev is None and found != 0 and not out:
            out.append("...")
        out.append(actual[found])
        pos, prev = found + 1, found
    if prev is not None and prev != len(actual) - 1 and out[-1] != "...":
        out.append("...")
    return out, problems


def same_values(excerpt, actual, where):
    """Problems (strings) where `excerpt` is not part of `actual`."""
    if isinstance(excerpt, dict):
        if not isinstance(actual, dict):
            return ["%s: expected an object" % where]
        problems = []
        for k, v in excerpt.items():
            if k not in actual:
                problems.append("%s.%s: not in the output" % (where, k))
            else:
                problems += same_values(v, actual[k], "%s.%s" % (where, k))
        return problems
    if isinstance(excerpt, list):
        if not isinstance(actual, list) or len(actual) != len(excerpt):
            return ["%s: expected a list of %d" % (where, len(excerpt))]
        return [p for i, (e, a) in enumerate(zip(excerpt, actual))
                for p in same_values(e, a, "%s[%d]" % (where, i))]
    if isinstance(excerpt, (int, float)) and not isinstance(excerpt, bool) and \
            isinstance(actual, (int, float)) and not isinstance(actual, bool):
        if math.isclose(excerpt, actual, rel_tol=1e-9, abs_tol=1e-12):
            return []
    elif excerpt == actual:
        return []
    return ["%s: the document shows %r, the tool prints %r" % (where, excerpt, actual)]


def with_values(excerpt, actual):
    """`excerpt`'s keys with `actual`'s values."""
    if isinstance(excerpt, dict) and isinstance(actual, dict):
        return {k: with_values(v, actual.get(k, v)) for k, v in excerpt.items()}
    return actual


def check(doc, tandem_plan, source_dir, update):
    lines = open(doc).read().split("\n")
    runner = Runner(tandem_plan, source_dir)
    failures, checked, edits = [], 0, []
    for start, end, info in fenced_blocks(lines):
        body = lines[start:end]
        excerpt = EXCERPT.match(lines[start - 2]) if start >= 2 else None
        if info == "json" and excerpt:
            checked += 1
            out, rc = runner.run(excerpt.group(1))
            try:
                actual = json.loads("\n".join(out))
            except ValueError:
                failures.append("%s:%d: %s printed no JSON (status %d):\n%s"
                                % (doc, start, excerpt.group(1), rc, "\n".join(out[:20])))
                continue
            shown = json.loads("\n".join(body))
            problems = same_values(shown, actual, "$")
            if problems and update:
                edits.append((start, end, json.dumps(with_values(shown, actual),
                                                     indent=2).split("\n")))
            elif problems:
                failures.append("%s:%d: the excerpt of `%s` differs:\n  %s"
                                % (doc, start, excerpt.group(1), "\n  ".join(problems)))
            continue
        if not body or not body[0].startswith("$ "):
            continue
        checked += 1
        new_body = []
        for command, expected in parse_transcript(body):
            out, rc = runner.run(command)
            shown, want_rc = split_rc(expected)
            ok = match(shown, out) is not None and (want_rc is None or want_rc == rc)
            new_body += ["$ " + command.split("\n")[0]] + command.split("\n")[1:]
            if ok or not update:
                new_body += expected
                if not ok:
                    failures.append(
                        "%s:%d: `%s` (status %d) does not print what the document shows.\n"
                        "--- the document (%s):\n%s\n--- the tool:\n%s"
                        % (doc, start, command.split("\n")[0], rc,
                           "rc=%s" % want_rc if want_rc is not None else "status not shown",
                           "\n".join(shown), "\n".join(out)))
                continue
            regenerated, problems = regenerate(shown, out)
            new_body += regenerated + (["rc=%d" % rc] if want_rc is not None else [])
            failures += ["%s:%d: %s" % (doc, start, p) for p in problems]
        if update and new_body != body:
            edits.append((start, end, new_body))
    for start, end, new in sorted(edits, reverse=True):
        lines[start:end] = new
    if update and edits:
        with open(doc, "w") as f:
            f.write("\n".join(lines))
        print("updated %d block(s) of %s" % (len(edits), doc))
    for f in failures:
        print(f, file=sys.stderr)
    print("%s: %d block(s) checked against %s: %d problem(s)"
          % (doc, checked, tandem_plan, len(failures)))
    if checked == 0:
        print("no checked block found in %s" % doc, file=sys.stderr)
        return 1
    return 1 if failures else 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tandem-plan", required=True, help="the tandem-plan to run")
    ap.add_argument("--source-dir", default=os.path.join(os.path.dirname(
        os.path.abspath(__file__)), "..", ".."), help="the source tree (default: this one)")
    ap.add_argument("--update", action="store_true", help="rewrite the blocks from the tool")
    ap.add_argument("doc")
    a = ap.parse_args(argv)
    return check(a.doc, a.tandem_plan, os.path.abspath(a.source_dir), a.update)


if __name__ == "__main__":
    sys.exit(main())
