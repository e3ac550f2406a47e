#!/usr/bin/env bash
# Checks out every labelled repository (from local bare mirrors, at its pinned commit), scans each
# with the scanner built from this working tree, and prints one SCAN-SCORE line per half.
# Needs the mirrors (see README.md), so it is not part of the README's test command.
# usage: once-scan/corpus/score.sh [--verbose] [--show-held-out]   (half B prints its SCAN-SCORE line only
# unless --show-held-out: B is held out, its misses are never read while tuning)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
export CORPUS_DIR=${CORPUS_DIR:-/work/ext/corpus}
"$here/checkout.py" "$here"/*.txt
cd "$top"
./mvnw -B -o -q -pl once-scan test-compile dependency:build-classpath \
  -Dmdep.outputFile=target/corpus.classpath -Dmdep.includeScope=test >/dev/null
cp="once-scan/target/test-classes:once-scan/target/classes:$(cat once-scan/target/corpus.classpath)"
java -cp "$cp" dev.once.scan.corpus.CorpusScore "$here" "$CORPUS_DIR" "$@"
