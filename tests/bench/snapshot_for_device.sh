#!/usr/bin/env bash
# Copies HEAD plus the given working-tree files into .pbsnap/ (ignored through .git/info/exclude),
# so that a device call builds what was committed and one's own edits, not other sessions'
# half-done work in a shared checkout. On the device:  ln -s ../.cuda-deps .pbsnap/.cuda-deps; cd .pbsnap
#   bash tests/bench/snapshot_for_device.sh FILE...
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
grep -qx '/.pbsnap/' .git/info/exclude || echo '/.pbsnap/' >> .git/info/exclude
rm -rf .pbsnap && mkdir .pbsnap
git archive HEAD | tar -x -C .pbsnap
git rev-parse HEAD > .pbsnap/SNAPSHOT_COMMIT
for f in "$@"; do mkdir -p ".pbsnap/$(dirname "$f")"; cp "$f" ".pbsnap/$f"; done
du -sh .pbsnap
