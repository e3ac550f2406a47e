#!/usr/bin/env python3
"""Checks out corpus repositories at their pinned commits from local bare mirrors: the Java and
configuration files only (what the scan reads), into $CORPUS_DIR/<label name>.

usage: checkout.py LABEL_FILE...   (mirrors: $MIRRORS/<owner>+<name>/repo, default /work/.mirror)
"""
import os, re, subprocess, sys

WANTED = re.compile(r"\.(java|ya?ml|properties|xml|sql|gradle|kts)$")
mirrors = os.environ.get("MIRRORS", "/work/.mirror")
out = os.environ.get("CORPUS_DIR", "/work/ext/corpus")

def field(text, name, default=None):
    m = re.search(r"^" + name + r":\s*(\S+)", text, re.M)
    return m.group(1) if m else default

for label in sys.argv[1:]:
    text = open(label).read()
    url, commit, scan = field(text, "repo"), field(text, "commit"), field(text, "scan", ".")
    slug = url.removeprefix("https://github.com/")
    git_dir = os.path.join(mirrors, slug.replace("/", "+"), "repo")
    if os.path.isdir(os.path.join(git_dir, ".git")):
        git_dir = os.path.join(git_dir, ".git")  # some snapshots arrive as a work tree
    dest = os.path.join(out, os.path.basename(label)[:-len(".txt")])
    if not os.path.isdir(git_dir):
        sys.exit(f"no mirror for {slug} at {git_dir} (bring it with the fetch tool)")
    stamp = os.path.join(dest, ".commit")
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
