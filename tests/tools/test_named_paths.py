"""Every file path that a comment, a doc page or a script of the tree names exists: a path
that starts with one of the tree's top-level folders and ends in a source or document
suffix. Paths a command writes (after --json, --out, -o or >) and patterns are not
checked; third_party/ and bench/results/ (measurements of their day) are not read."""

import os
import re
import subprocess

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SUFFIXES = (".cc", ".h", ".cu", ".cuh", ".py", ".md", ".sh", ".cmake", ".json", ".txt",
            ".toml")
READ = (".cc", ".h", ".cu", ".cuh", ".py", ".md", ".sh", ".txt", ".cmake")


def tracked_files():
    out = subprocess.run(["git", "-C", ROOT, "ls-files"], capture_output=True, text=True)
    if out.returncode != 0:
        return None
    return [f for f in out.stdout.split("\n") if f]


def named_paths(text, tops):
    names = "|".join(re.escape(t) for t in tops)
    suffixes = "|".join(re.escape(s[1:]) for s in SUFFIXES)
    pattern = re.compile(r"(?<![\w./-])(--json |--out |-o |> )?((?:%s)/[\w./-]*\w\.(?:%s))\b"
                         % (names, suffixes))
    for m in pattern.finditer(text):
        if not m.group(1):
            yield m.group(2)


def test_every_path_the_tree_names_exists():
    files = tracked_files()
    if files is None:
        import pytest
        pytest.skip("not a git checkout: the tracked files are unknown")
    tops = sorted({f.split("/")[0] for f in files if "/" in f})
    missing = {}
    for f in files:
        if f.startswith(("third_party/", "bench/results/")) or not f.endswith(READ):
            continue
        try:
            with open(os.path.join(ROOT, f), encoding="utf-8") as fh:
                text = fh.read()
        except (UnicodeDecodeError, OSError):
            continue
        for p in named_paths(text, tops):
            if not os.path.exists(os.path.join(ROOT, p)):
                missing.setdefault(p, []).append(f)
    assert not missing, "paths named but not in the tree: " + "; ".join(
        "%s (in %s)" % (p, ", ".join(sorted(set(fs)))) for p, fs in sorted(missing.items()))


def test_the_check_finds_a_missing_path():
    gone = "offload" + "/no_such_file.h"  # split, so that the scan above does not see it
    text = "see %s and docs/planner.md; writes --json bench/results/x.json" % gone
    assert list(named_paths(text, ["offload", "docs", "bench"])) == [gone, "docs/planner.md"]
