#!/usr/bin/env bash
# A cold CUDA build takes about 550 s of a device call's 600 s; a machine that idles off between
# calls starts bare. This keeps one commit's built programs so a fresh machine can run them at once:
#   bash tests/bench/device_binaries.sh pack PROGRAM...   # on the card's machine, after h200_build.sh:
#        $BUILD_DIR's app/ and tests/ PROGRAMs (stripped) and /tmp/kc's libraries, xz'd into
#        $OUT/pbbin.tar.xz.00, .01, ... (15 MiB parts, what the device returns), stamped with the commit
#   bash tests/bench/device_binaries.sh unpack DIR        # on a fresh machine: DIR holds those parts
#        (carried); restores them to $BUILD_DIR and /tmp/kc only where the stamp is this tree's commit
# The commit is .pbsnap's SNAPSHOT_COMMIT (written by snapshot_for_device.sh), else git's HEAD.
set -uo pipefail
BUILD_DIR=${BUILD_DIR:-/tmp/build-cuda}
commit() { cat SNAPSHOT_COMMIT 2>/dev/null || git rev-parse HEAD 2>/dev/null || echo unknown; }
case "${1:-}" in
pack)
  shift
  files=()
  for t in "$@"; do
    for d in app tests; do [ -x "$BUILD_DIR/$d/$t" ] && files+=("$BUILD_DIR/$d/$t"); done
  done
  [ ${#files[@]} = 0 ] && { echo "device_binaries: none of '$*' is built in $BUILD_DIR" >&2; exit 1; }
  stage=$(mktemp -d)
  for f in "${files[@]}"; do
    mkdir -p "$stage$(dirname "$f")"; strip -o "$stage$f" "$f" 2>/dev/null || cp -a "$f" "$stage$f"
  done
  [ -d /tmp/kc ] && mkdir -p "$stage/tmp" && cp -a /tmp/kc "$stage/tmp/"
  commit > "$stage/pbbin.commit"
  tar -C "$stage" -cf - . | xz -T0 -6 | split -b 15M -d - "${OUT:-/tmp/pb-out}/pbbin.tar.xz."
  rm -rf "$stage"
  ls -l "${OUT:-/tmp/pb-out}"/pbbin.tar.xz.*
  ;;
unpack)
  dir=${2:?unpack DIR}
  ls "$dir"/pbbin.tar.xz.* >/dev/null 2>&1 || { echo "device_binaries: no parts in $dir" >&2; exit 1; }
  parts() { cat "$dir"/pbbin.tar.xz.* | xz -d; }
  stamp=$(parts | tar -xOf - ./pbbin.commit)
  if [ "$stamp" != "$(commit)" ]; then
    echo "device_binaries: the parts are ${stamp}'s, this tree is $(commit)'s: not used" >&2; exit 1
  fi
  # Existing folders (/, /tmp) keep their own modes.
  parts | tar -C / --no-overwrite-dir --exclude=./pbbin.commit -xf -
  echo "device_binaries: restored $(commit)'s programs"
  ;;
*) echo "usage: $0 pack PROGRAM... | unpack DIR" >&2; exit 2 ;;
esac
