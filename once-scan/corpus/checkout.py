#!/usr/bin/env python3
"""Checks out corpus repositories at their pinned commits from local bare mirrors: the Java and
configuration files only (what the scan reads), into $CORPUS_DIR/<label name>.

usage: checkout.py LABEL_FILE...   (mirrors: $MIRRORS/<owner>+<name>/repo, default /work/.mirror)

A repository with no mirror, or whose mirror's snapshot lacks the pinned commit, is named on stderr and left without
a checkout (any earlier one removed), and the others go on: CorpusScore lists it as NOT-SCORED and counts it in its
half's SCAN-SCORE line (not_scored=N) rather than scoring other code or dropping it without a word.
"""
import os, re, subprocess, sys

WANTED = re.compile(r"\.(java|ya?ml|properties|xml|sql|gradle|kts)$")
mirrors = os.environ.get("MIRRORS", "/work/.mirror")
out = os.environ.get("CORPUS_DIR", "/work/ext/corpus")

def field(text, name, default=None):
    m = re.search(r"^" + name + r":\s*(\S+)", text, re.M)
    return m.group(1) if m else default

not_out = []
for label in sys.argv[1:]:
    text = open(label).read()
    url, commit, scan = field(text, "repo"), field(text, "commit"), field(text, "scan", ".")
    slug = url.removeprefix("https://github.com/")
    git_dir = os.path.join(mirrors, slug.replace("/", "+"), "repo")
    if os.path.isdir(os.path.join(git_dir, ".git")):
        git_dir = os.path.join(git_dir, ".git")  # some snapshots arrive as a work tree
    dest = os.path.join(out, os.path.basename(label)[:-len(".txt")])
    stamp = os.path.join(dest, ".commit")
    why = None
    if not os.path.isdir(git_dir):
        why = f"no mirror at {git_dir} (bring it with the fetch tool)"
    elif subprocess.run(["git", "--git-dir", git_dir, "cat-file", "-e", commit + "^{commit}"],
                        capture_output=True).returncode != 0:
        why = f"pinned commit {commit} is not in the snapshot at {git_dir}"
    if why:
        subprocess.run(["rm", "-rf", dest], check=True)
        not_out.append(slug)
        print(f"NOT CHECKED OUT {slug}: {why}", file=sys.stderr)
        continue
    if os.path.exists(stamp) and open(stamp).read().strip() == commit:
        continue
    subprocess.run(["rm", "-rf", dest], check=True)
    # quotepath off: a path with non-ASCII letters (navikt/fp-mottak's ...Håndterer.java) is listed as it is,
    # not quoted with octal escapes that match no wanted extension
    tree = subprocess.run(["git", "-c", "core.quotepath=off", "--git-dir", git_dir, "ls-tree", "-r", commit] + ([] if scan == "." else ["--", scan]),
                          check=True, capture_output=True, text=True).stdout
    files = []
    for line in tree.splitlines():
        meta, path = line.split("\t", 1)
        mode, kind, sha = meta.split()
        if kind == "blob" and WANTED.search(path):
            files.append((sha, path))
    batch = subprocess.Popen(["git", "--git-dir", git_dir, "cat-file", "--batch"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    for sha, path in files:
        batch.stdin.write((sha + "\n").encode()); batch.stdin.flush()
        header = batch.stdout.readline().decode().split()
        if len(header) < 3 or header[1] == "missing":
            continue  # a file the snapshot lacks (too large): skipped, not fatal
        data = batch.stdout.read(int(header[2])); batch.stdout.read(1)
        target = os.path.join(dest, path)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as f:
            f.write(data)
    batch.stdin.close(); batch.wait()
    os.makedirs(dest, exist_ok=True)
    with open(stamp, "w") as f:
        f.write(commit + "\n")
    print(f"checked out {slug} {commit[:12]} ({len(files)} files) into {dest}", file=sys.stderr)
if not_out:
    print(f"{len(not_out)} repositories not checked out (not scored): {' '.join(not_out)}", file=sys.stderr)
