# Sourced by scripts/run, scripts/test, scripts/bench and scripts/fuzz: installs the Debian 12
# packages PilotBench needs (only those missing; as root or through sudo), then configures and builds
# into $BUILD_DIR.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build}
PB_PACKAGES="cmake ninja-build g++ ccache pkg-config git qt6-base-dev qt6-charts-dev libqt6opengl6-dev libxkbcommon-dev
  libqt6sql6-sqlite libtorch-dev libgloo-dev libspdlog-dev libssl-dev
  xvfb xauth poppler-utils fonts-dejavu-core dpkg-dev file python3 python3-torch clang libclang-rt-14-dev"

pb_install_packages() {
  local missing=()
  for p in $PB_PACKAGES; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "== installing Debian packages: ${missing[*]}"
  local sudo=""
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null || { echo "error: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
    sudo="sudo"
  fi
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
}

pb_build() {
  local jobs
  jobs=$(nproc)
  # Torch-heavy translation units take ~1.5 GB each; keep the build inside memory on small hosts.
  local mem_gb
  mem_gb=$(awk '/MemTotal/ {print int($2/1048576)}' /proc/meminfo)
  [ "$mem_gb" -lt $((jobs * 2)) ] && jobs=$(( mem_gb / 2 > 0 ? mem_gb / 2 : 1 ))
  export CCACHE_DIR=${CCACHE_DIR:-$HOME/.cache/ccache}
  if [ ! -f "$BUILD_DIR/build.ninja" ]; then
    cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=${CMAKE_BUILD_TYPE:-RelWithDebInfo} ${PB_CMAKE_ARGS:-}
  fi
  cmake --build "$BUILD_DIR" -j "$jobs"
}
